//! Resource plans in-process: the engine's plan for a caller, its WHERE
//! clause and parameters run on a real SQLite table (rusqlite), and the
//! rows it selects compared with each row's own authorize answer.

mod common;
// The list-filtering example, whose listing is tested here too.
#[allow(dead_code)]
#[path = "../examples/list_orders.rs"]
mod list_orders;

use common::{claims, engine, idp, now};
use list_orders::sql_value;
use serde_json::{json, Value};
use svc::{Dialect, PlanKind};

/// The table: orders of two tenants; some lack an owner or a status.
fn orders() -> Vec<Value> {
    (0..60)
        .map(|i| {
            let mut attrs = serde_json::Map::new();
            if i % 3 != 0 {
                let owner = ["user-1", "user-2"][i % 2];
                attrs.insert("owner".into(), json!(owner));
            }
            if i % 4 != 0 {
                let status = [
                    "open",
                    "archived",
                    "shipped",
                    "public",
                    "Public",
                    "public draft",
                    "pending",
                ][i % 7];
                attrs.insert("status".into(), json!(status));
            }
            let tenant = ["acme", "globex"][i % 5 / 3];
            json!({"id": format!("o{i}"), "tenant": tenant, "attributes": attrs})
        })
        .collect()
}

fn database(rows: &[Value]) -> rusqlite::Connection {
    let db = rusqlite::Connection::open_in_memory().unwrap();
    db.execute_batch("CREATE TABLE orders (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, owner TEXT, status TEXT)")
        .unwrap();
    for r in rows {
        let a = &r["attributes"];
        db.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            rusqlite::params![
                r["id"].as_str(),
                r["tenant"].as_str(),
                a["owner"].as_str(),
                a["status"].as_str()
            ],
        )
        .unwrap();
    }
    db
}

fn select(db: &rusqlite::Connection, plan: &svc::Plan) -> Vec<String> {
    let mut st = db
        .prepare(&format!("SELECT id FROM orders WHERE {} ORDER BY id", plan.r#where))
        .unwrap();
    let params = rusqlite::params_from_iter(plan.params.iter().map(sql_value));
    let mut ids: Vec<String> = st
        .query_map(params, |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    ids.sort();
    ids
}

/// An engine of its own (named name), the orders and their table.
fn fixture(name: &str) -> (svc::Engine, Vec<Value>, rusqlite::Connection) {
    let rows = orders();
    let db = database(&rows);
    (engine(name), rows, db)
}

/// The plan of the bearer of token for action on orders, in SQLite's dialect.
fn plan_of(e: &svc::Engine, token: &str, action: &str) -> svc::Plan {
    e.plan_resources(token, action, "orders", Dialect::Sqlite).unwrap()
}

/// The rows the plan's condition holds for, by Plan::permits.
fn permitted(plan: &svc::Plan, rows: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = rows
        .iter()
        .filter(|r| plan.permits(r))
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// The rows each one's own authorize answer allows.
fn allowed(e: &svc::Engine, token: &str, action: &str, rows: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = rows
        .iter()
        .filter(|r| {
            let input = json!({"action": action, "resource": {"type": "orders", "id": r["id"], "tenant": r["tenant"],
                "attributes": r["attributes"]}});
            e.authorize(token, &input).unwrap().allowed
        })
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_viewer_lists_its_tenants_orders() {
    let (e, rows, db) = fixture("plan-viewer");
    let tok = idp().token("user-1", "acme", &["viewer"]);
    let plan = plan_of(&e, &tok, "orders:read");
    assert_eq!(plan.kind, PlanKind::Conditional, "{plan:?}");
    assert_eq!(plan.reason, "plan-conditional");
    assert_eq!(plan.subject.as_deref(), Some("user-1"));
    assert!(
        !plan.decision_id.is_empty() && !plan.policy_revision.is_empty(),
        "{plan:?}"
    );
    assert!(
        !plan.r#where.contains("acme") && plan.r#where.contains('?'),
        "{}",
        plan.r#where
    );
    let got = select(&db, &plan);
    assert!(!got.is_empty() && got.len() < rows.len(), "{got:?}");
    assert_eq!(got, allowed(&e, &tok, "orders:read", &rows));
    // The condition itself says the same of every row.
    assert_eq!(got, permitted(&plan, &rows));

    let pg = e.plan_resources(&tok, "orders:read", "", Dialect::Postgres).unwrap();
    assert!(pg.r#where.contains("$1"), "{}", pg.r#where);
    assert_eq!(pg.params, plan.params);
}

#[test]
fn a_plan_over_attributes_some_rows_lack() {
    // sdk/testdata/plan: owners read their orders unless archived, the
    // tenant reads public ones (a status starting with "public",
    // case-sensitively, without "draft").
    let policy = common::repo_root().join("sdk/testdata/plan");
    let extra = format!(
        "{}\n[policy]\ndir = {:?}\n",
        common::UNLIMITED,
        policy.display().to_string()
    );
    let e = svc::Engine::from_config_file(common::config_file("plan-attributes", &extra)).expect("engine");
    let rows = orders();
    let db = database(&rows);
    let tok = idp().token("user-1", "acme", &["viewer"]);
    let plan = plan_of(&e, &tok, "orders:read");
    assert!(plan.r#where.contains("IS NOT TRUE"), "{}", plan.r#where);
    let got = select(&db, &plan);
    // user-1's orders of acme without a status are not archived: listed.
    let unknown: Vec<&str> = rows
        .iter()
        .filter(|r| {
            r["tenant"] == "acme" && r["attributes"]["owner"] == "user-1" && r["attributes"].get("status").is_none()
        })
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert!(
        !unknown.is_empty() && unknown.iter().all(|id| got.iter().any(|g| g == id)),
        "{got:?}"
    );
    assert_eq!(got, allowed(&e, &tok, "orders:read", &rows));
    assert_eq!(got, permitted(&plan, &rows));
    assert!(plan.r#where.contains("GLOB"), "{}", plan.r#where);
    let public: Vec<&str> = rows
        .iter()
        .filter(|r| r["tenant"] == "acme" && r["attributes"]["status"] == "public")
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert!(
        !public.is_empty() && public.iter().all(|id| got.iter().any(|g| g == id)),
        "{got:?}"
    );
    let other_case = rows.iter().any(|r| {
        r["tenant"] == "acme" && r["attributes"]["status"] == "Public" && r["attributes"]["owner"] != "user-1"
    });
    assert!(other_case, "the rows should hold a status of another case");
}

#[test]
fn always_denied_lists_nothing() {
    let (e, _, db) = fixture("plan-denied");
    let viewer = idp().token("user-1", "acme", &["viewer"]);
    let plan = plan_of(&e, &viewer, "orders:delete");
    assert_eq!(
        (plan.kind, plan.r#where.as_str(), plan.condition.is_none()),
        (PlanKind::AlwaysDenied, "1 = 0", true)
    );
    assert!(select(&db, &plan).is_empty());

    let mut c = claims("user-1", "acme", &["viewer"]);
    c["exp"] = json!(now() - 3600);
    let plan = plan_of(&e, &idp().sign(&c), "orders:read");
    assert_eq!(
        (plan.kind, plan.reason.as_str()),
        (PlanKind::AlwaysDenied, "token-expired"),
        "{plan:?}"
    );
    assert!(select(&db, &plan).is_empty());
    let plan = e
        .plan_resources("not-a-token", "orders:read", "orders", Dialect::Mysql)
        .unwrap();
    assert_eq!(plan.kind, PlanKind::AlwaysDenied);
}

#[test]
fn an_admin_lists_its_tenants_orders_too() {
    let (e, rows, db) = fixture("plan-admin");
    let admin = idp().token("root", "acme", &["admin"]);
    let plan = plan_of(&e, &admin, "orders:delete");
    assert_eq!(select(&db, &plan), allowed(&e, &admin, "orders:delete", &rows));
}

#[test]
fn a_missing_action_is_input_invalid() {
    let e = engine("plan-invalid");
    let tok = idp().token("user-1", "acme", &["viewer"]);
    let err = e.plan_resources(&tok, "", "orders", Dialect::Sqlite).unwrap_err();
    assert_eq!(err.reason(), "input-invalid", "{err}");
}

#[test]
fn the_example_lists_only_permitted_orders() {
    let e = engine("plan-example");
    let db = list_orders::demo().unwrap();
    let viewer = idp().token("alice", "acme", &["viewer"]);
    let ids: Vec<String> = list_orders::list(&e, &db, &viewer)
        .unwrap()
        .into_iter()
        .map(|o| o.0)
        .collect();
    assert_eq!(
        ids,
        ["ord-1", "ord-2", "ord-3"],
        "acme's orders, the one without an owner included"
    );
    assert!(list_orders::list(&e, &db, "not-a-token").unwrap().is_empty());
}
