//! Random programs against two independent models: a host-only model of the contents and a
//! model of the coherence protocol that predicts every copy per link. The models and the
//! program runner are in `common/programs_model.rs`, shared with `eviction.rs`.
//!
//! `RIMMS_PROPTEST_CASES` raises the case count (2,000 by default).

use crate::common::programs_model as model;

use model::{check_program, op};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("RIMMS_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_programs_match_both_models(ops in prop::collection::vec(op(), 1..40)) {
        check_program(&ops, false, None)?;
    }

    /// The same with sim0's memory host-mapped: in-place host and CPU access, and placement.
    #[test]
    fn random_programs_with_host_mapped_memory_match_both_models(ops in prop::collection::vec(op(), 1..40)) {
        check_program(&ops, true, None)?;
    }
}
