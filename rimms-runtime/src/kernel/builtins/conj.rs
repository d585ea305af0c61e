//! `conj`: `out = conj(input)`, element-wise. Its declaration is `apis::conj`.
//! The rest (the call's description, shape check and merge rule) is `element_wise.rs`'s.

super::element_wise::element_wise_kind!(Conj = conj -> num_complex::Complex32);
