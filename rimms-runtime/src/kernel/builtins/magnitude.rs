//! `magnitude`: `out = |input|`, element-wise. Its declaration is `apis::magnitude`.
//! The rest (the call's description, shape check and merge rule) is `element_wise.rs`'s.

super::element_wise::element_wise_kind!(Magnitude = magnitude -> f32);
