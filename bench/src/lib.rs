//! What the benchmark shares with the scripts: the one fake Lambda Runtime
//! API (`runtime_api`), behind the `lambda` suite and the `lambda-runtime`
//! binary that scripts/deploy-rehearsal.py drives.

pub mod runtime_api;
