//! API identities: a name for stats and errors and an index into the per-API counters.

use super::registry::ApiDecl;

/// A typed operation that devices implement: a handle to its declaration.
#[derive(Clone, Copy, Debug)]
pub struct Api(&'static ApiDecl);

impl Api {
    /// The API declared by `decl` (made by `#[rimms::api]`, or by hand for an ad-hoc kernel).
    pub fn of(decl: &'static ApiDecl) -> Api {
        Api(decl)
    }

    /// The API's name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    #[inline]
    pub(crate) fn index(&self) -> usize {
        self.0.index()
    }
}
