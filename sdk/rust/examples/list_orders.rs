//! List filtering in-process: the orders a caller may read, from a real
//! SQLite database, with one plan instead of one decision per row.
//!
//!   cargo run --example list_orders -- <token> [orders.db]
//!
//! The engine is configured as svc-sidecar is (./svc.toml, then SVC_*
//! variables; without either, development mode). The database is the
//! file given, with a table orders (id, tenant, owner, status), or else a
//! demo table in memory.

use rusqlite::types::Value as Sql;
use serde_json::Value;
use svc::{Dialect, Engine, PlanKind};

/// A plan parameter as SQLite takes it.
pub fn sql_value(v: &Value) -> Sql {
    match v {
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(*b as i64),
        Value::Number(n) => n
            .as_i64()
            .map(Sql::Integer)
            .unwrap_or_else(|| Sql::Real(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => Sql::Text(s.clone()),
        other => Sql::Text(other.to_string()),
    }
}

/// A demo table in memory: orders of two tenants, one without an owner
/// and a status.
pub fn demo() -> rusqlite::Result<rusqlite::Connection> {
    let db = rusqlite::Connection::open_in_memory()?;
    db.execute_batch(
        "CREATE TABLE orders (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, owner TEXT, status TEXT);
         INSERT INTO orders VALUES ('ord-1', 'acme', 'alice', 'open'), ('ord-2', 'acme', 'bob', 'archived'),
           ('ord-3', 'acme', NULL, NULL), ('ord-4', 'globex', 'alice', 'open');",
    )?;
    Ok(db)
}

/// An order: id, tenant, owner, status.
pub type Order = (String, String, Option<String>, Option<String>);

/// The orders of db the bearer of token may read, by one plan.
pub fn list(engine: &Engine, db: &rusqlite::Connection, token: &str) -> Result<Vec<Order>, Box<dyn std::error::Error>> {
    let plan = engine.plan_resources(token, "orders:read", "orders", Dialect::Sqlite)?;
    eprintln!(
        "plan: {:?} ({}) where {} {:?}",
        plan.kind, plan.reason, plan.r#where, plan.params
    );
    if plan.kind == PlanKind::AlwaysDenied {
        return Ok(Vec::new());
    }
    // plan.r#where holds only ? placeholders; its values are plan.params.
    let mut st = db.prepare(&format!(
        "SELECT id, tenant, owner, status FROM orders WHERE {} ORDER BY id",
        plan.r#where
    ))?;
    let rows = st.query_map(rusqlite::params_from_iter(plan.params.iter().map(sql_value)), |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let token = args.next().ok_or("usage: list_orders <token> [orders.db]")?;
    let db = match args.next() {
        Some(path) => rusqlite::Connection::open(path)?,
        None => demo()?,
    };
    let engine = Engine::from_env()?;
    for (id, tenant, owner, status) in list(&engine, &db, &token)? {
        println!(
            "{id}\t{tenant}\t{}\t{}",
            owner.unwrap_or_default(),
            status.unwrap_or_default()
        );
    }
    Ok(())
}
