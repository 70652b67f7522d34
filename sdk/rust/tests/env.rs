//! SVC_* variables, in a test binary of their own: they are process-wide.

mod common;

#[test]
fn environment_variables_apply_over_the_file() {
    // SVC_* variables apply after the file, as in svc-sidecar: an unknown
    // fail mode makes the configuration invalid.
    let path = common::config_file("env", "");
    std::env::set_var("SVC_FAIL_MODE", "sideways");
    let r = svc::Engine::from_config_file(&path);
    std::env::remove_var("SVC_FAIL_MODE");
    let err = r.unwrap_err();
    assert_eq!(err.reason(), "config-invalid", "{err}");
    assert!(err.to_string().contains("SVC_FAIL_MODE"), "{err}");
}
