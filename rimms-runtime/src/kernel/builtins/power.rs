//! `power`: `out = |input|²`, element-wise. Its declaration is `apis::power`.
//! The rest (the call's description, shape check and merge rule) is `element_wise.rs`'s.

super::element_wise::element_wise_kind!(Power = power -> f32);
