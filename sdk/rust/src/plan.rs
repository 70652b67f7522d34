//! Resource plans: which resources of a type a caller may act on
//! ([`crate::Engine::plan_resources`]).
//!
//! A plan's [`PlanKind`] says whether every resource, none, or those meeting
//! its [`Condition`] are permitted; `where` and `params` are the condition
//! as a SQL WHERE clause with bind parameters only, for the dialect asked
//! (`postgres`: `$1`, `$2`…; `sqlite`, `mysql`: `?`), columns named by the
//! engine's `list_filter.columns` (default `id`, `tenant` and each
//! attribute's own name).
//!
//! A field the resource lacks (a NULL column) makes every comparison
//! false; `not` holds when its argument does not, so a missing field makes
//! `not` true (SQL `(x) IS NOT TRUE`); `eq` and `ne` with null test for a
//! missing field; `in` with no values is false. `starts_with`, `ends_with`
//! and `contains` take a string and hold for a string field with that
//! prefix, suffix or substring, case-sensitively; a field that is not a
//! string never meets them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which resources a plan permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// Every resource of the type (`where` is `1 = 1`).
    AlwaysAllowed,
    /// None (`where` is `1 = 0`); also a refused credential's plan.
    AlwaysDenied,
    /// Those meeting the plan's condition.
    Conditional,
}

/// The SQL dialect of a plan's `where`: it decides the bind parameter
/// markers and how identifiers are quoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// `$1`, `$2`…; identifiers quoted with `"`.
    #[default]
    Postgres,
    /// `?`; identifiers quoted with backticks: SQLite reads a
    /// double-quoted name that is no column as a string literal, and a
    /// backticked one as the error `no such column`.
    Sqlite,
    /// `?`; identifiers quoted with backticks.
    Mysql,
}

impl Dialect {
    /// The dialect's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Postgres => "postgres",
            Dialect::Sqlite => "sqlite",
            Dialect::Mysql => "mysql",
        }
    }
}

/// A node of a plan's condition tree, in its JSON shape:
/// `{"op":"and","args":[…]}`, `{"op":"not","arg":…}`,
/// `{"op":"eq","field":"attributes.owner","value":"alice"}`,
/// `{"op":"in","field":"id","values":[…]}`,
/// `{"op":"starts_with","field":"attributes.path","value":"/team-a/"}`. A
/// field is `id`, `tenant` or `attributes.<name>`; a value is a JSON
/// scalar, a string for `starts_with`, `ends_with` and `contains`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Condition {
    And {
        #[serde(default)]
        args: Vec<Condition>,
    },
    Or {
        #[serde(default)]
        args: Vec<Condition>,
    },
    Not {
        arg: Box<Condition>,
    },
    Eq {
        field: String,
        value: Value,
    },
    Ne {
        field: String,
        value: Value,
    },
    Lt {
        field: String,
        value: Value,
    },
    Le {
        field: String,
        value: Value,
    },
    Gt {
        field: String,
        value: Value,
    },
    Ge {
        field: String,
        value: Value,
    },
    In {
        field: String,
        #[serde(default)]
        values: Vec<Value>,
    },
    StartsWith {
        field: String,
        value: String,
    },
    EndsWith {
        field: String,
        value: String,
    },
    Contains {
        field: String,
        value: String,
    },
}

impl Condition {
    /// Whether the condition holds for a resource given as JSON
    /// (`{"id": …, "tenant": …, "attributes": {…}}`), with the plan's
    /// meaning: a missing field makes a comparison false. Numbers compare
    /// as numbers, strings as strings; values of different types are
    /// unequal and unordered.
    pub fn holds(&self, resource: &Value) -> bool {
        let field_value = |f: &str| -> Option<&Value> {
            let v = match f.strip_prefix("attributes.") {
                Some(name) => resource.get("attributes").and_then(|a| a.get(name)),
                None => resource.get(f),
            };
            v.filter(|v| !v.is_null())
        };
        let compare = |field: &str, value: &Value, ok: fn(std::cmp::Ordering) -> bool| -> bool {
            match (field_value(field), value) {
                (Some(v), w) if !w.is_null() => order(v, w).is_some_and(ok),
                _ => false,
            }
        };
        match self {
            Condition::And { args } => args.iter().all(|a| a.holds(resource)),
            Condition::Or { args } => args.iter().any(|a| a.holds(resource)),
            Condition::Not { arg } => !arg.holds(resource),
            Condition::Eq { field, value } if value.is_null() => field_value(field).is_none(),
            Condition::Ne { field, value } if value.is_null() => field_value(field).is_some(),
            Condition::Eq { field, value } => compare(field, value, |o| o.is_eq()),
            Condition::Ne { field, value } => match field_value(field) {
                Some(v) => order(v, value) != Some(std::cmp::Ordering::Equal),
                None => false,
            },
            Condition::Lt { field, value } => compare(field, value, |o| o.is_lt()),
            Condition::Le { field, value } => compare(field, value, |o| o.is_le()),
            Condition::Gt { field, value } => compare(field, value, |o| o.is_gt()),
            Condition::Ge { field, value } => compare(field, value, |o| o.is_ge()),
            Condition::In { field, values } => match field_value(field) {
                Some(v) => values.iter().any(|w| order(v, w) == Some(std::cmp::Ordering::Equal)),
                None => values.iter().any(Value::is_null),
            },
            Condition::StartsWith { field, value } => field_value(field)
                .and_then(Value::as_str)
                .is_some_and(|s| s.starts_with(value.as_str())),
            Condition::EndsWith { field, value } => field_value(field)
                .and_then(Value::as_str)
                .is_some_and(|s| s.ends_with(value.as_str())),
            Condition::Contains { field, value } => field_value(field)
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains(value.as_str())),
        }
    }
}

fn order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// The answer of [`crate::Engine::plan_resources`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Plan {
    pub kind: PlanKind,
    /// Set only for a conditional plan.
    #[serde(default)]
    pub condition: Option<Condition>,
    /// The WHERE clause: `1 = 1` for always allowed, `1 = 0` for always
    /// denied, else the condition with bind parameters only.
    pub r#where: String,
    /// The bind parameters of `where`, in order: JSON scalars.
    pub params: Vec<Value>,
    /// Identifies the plan in the audit and decision logs.
    pub decision_id: String,
    /// `plan-conditional`, …; for a refused credential its failure code
    /// (`token-expired`, …).
    pub reason: String,
    /// The caller's subject and tenant, when the credential verified.
    pub subject: Option<String>,
    pub tenant_id: Option<String>,
    /// The policy revision the plan was made from.
    pub policy_revision: String,
    /// Explains a refused credential; never token or key material.
    pub message: Option<String>,
}

impl Plan {
    /// Whether the plan permits a resource given as JSON (see
    /// [`Condition::holds`]).
    pub fn permits(&self, resource: &Value) -> bool {
        match self.kind {
            PlanKind::AlwaysAllowed => true,
            PlanKind::AlwaysDenied => false,
            PlanKind::Conditional => self.condition.as_ref().is_some_and(|c| c.holds(resource)),
        }
    }
}

/// The engine's JSON answer (sdk/rust/capi, plan.go).
#[derive(Deserialize)]
pub(crate) struct RawPlan {
    kind: PlanKind,
    #[serde(default)]
    condition: Option<Condition>,
    sql: RawSql,
    #[serde(default)]
    decision_id: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    policy_revision: String,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct RawSql {
    r#where: String,
    #[serde(default)]
    params: Vec<Value>,
}

impl From<RawPlan> for Plan {
    fn from(r: RawPlan) -> Plan {
        Plan {
            kind: r.kind,
            condition: r.condition,
            r#where: r.sql.r#where,
            params: r.sql.params,
            decision_id: r.decision_id,
            reason: r.reason,
            subject: r.subject,
            tenant_id: r.tenant_id,
            policy_revision: r.policy_revision,
            message: r.message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_round_trip() {
        let src = json!({"op": "and", "args": [
            {"op": "eq", "field": "tenant", "value": "acme"},
            {"op": "not", "arg": {"op": "ge", "field": "attributes.level", "value": 3}},
            {"op": "in", "field": "id", "values": ["a", null]},
            {"op": "or", "args": []}
        ]});
        let c: Condition = serde_json::from_value(src.clone()).unwrap();
        assert_eq!(serde_json::to_value(&c).unwrap(), src);
        let c: Condition = serde_json::from_value(json!({"op": "in", "field": "id"})).unwrap();
        assert_eq!(
            c,
            Condition::In {
                field: "id".into(),
                values: vec![]
            }
        );
        assert!(serde_json::from_value::<Condition>(json!({"op": "xor"})).is_err());
        let src = json!({"op": "or", "args": [
            {"op": "starts_with", "field": "attributes.path", "value": "/team-a/"},
            {"op": "ends_with", "field": "id", "value": ".pdf"},
            {"op": "not", "arg": {"op": "contains", "field": "tenant", "value": "é%_"}}
        ]});
        let c: Condition = serde_json::from_value(src.clone()).unwrap();
        assert_eq!(serde_json::to_value(&c).unwrap(), src);
        for bad in [
            json!({"op": "starts_with", "field": "id", "value": 1}),
            json!({"op": "ends_with", "field": "id", "value": null}),
            json!({"op": "contains", "field": "id"}),
        ] {
            assert!(serde_json::from_value::<Condition>(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_missing_field_makes_comparisons_false_and_not_true() {
        let owner_alice: Condition =
            serde_json::from_value(json!({"op": "eq", "field": "attributes.owner", "value": "alice"})).unwrap();
        let not_alice = Condition::Not {
            arg: Box::new(owner_alice.clone()),
        };
        let missing = json!({"id": "1", "tenant": "acme", "attributes": {}});
        let alice = json!({"id": "2", "tenant": "acme", "attributes": {"owner": "alice"}});
        let bob = json!({"id": "3", "tenant": "acme", "attributes": {"owner": "bob"}});
        assert_eq!(
            [&missing, &alice, &bob].map(|r| owner_alice.holds(r)),
            [false, true, false]
        );
        assert_eq!(
            [&missing, &alice, &bob].map(|r| not_alice.holds(r)),
            [true, false, true]
        );
        let ne: Condition =
            serde_json::from_value(json!({"op": "ne", "field": "attributes.owner", "value": "alice"})).unwrap();
        assert_eq!([&missing, &alice, &bob].map(|r| ne.holds(r)), [false, false, true]);
        let is_null: Condition =
            serde_json::from_value(json!({"op": "in", "field": "attributes.owner", "values": [null, "bob"]})).unwrap();
        assert_eq!([&missing, &alice, &bob].map(|r| is_null.holds(r)), [true, false, true]);
        let gt: Condition = serde_json::from_value(json!({"op": "gt", "field": "attributes.n", "value": 2})).unwrap();
        assert!(gt.holds(&json!({"attributes": {"n": 2.5}})));
        assert!(
            !gt.holds(&json!({"attributes": {"n": "3"}})),
            "a string is not ordered with a number"
        );
        assert!(!Condition::Or { args: vec![] }.holds(&missing));
        let starts: Condition =
            serde_json::from_value(json!({"op": "starts_with", "field": "attributes.owner", "value": "al"})).unwrap();
        let ends: Condition =
            serde_json::from_value(json!({"op": "ends_with", "field": "attributes.owner", "value": "ICE"})).unwrap();
        let contains: Condition =
            serde_json::from_value(json!({"op": "contains", "field": "attributes.owner", "value": "o"})).unwrap();
        assert_eq!([&missing, &alice, &bob].map(|r| starts.holds(r)), [false, true, false]);
        assert_eq!(
            [&missing, &alice, &bob].map(|r| ends.holds(r)),
            [false, false, false],
            "case-sensitive"
        );
        assert_eq!(
            [&missing, &alice, &bob].map(|r| contains.holds(r)),
            [false, false, true]
        );
        let not_contains = Condition::Not {
            arg: Box::new(contains.clone()),
        };
        assert_eq!(
            [&missing, &alice, &bob].map(|r| not_contains.holds(r)),
            [true, true, false]
        );
        assert!(
            !starts.holds(&json!({"attributes": {"owner": 1}})),
            "a number is no string"
        );
        assert!(Condition::And { args: vec![] }.holds(&missing));
    }
}
