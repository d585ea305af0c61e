//! Which APIs exist and which device kinds implement them.
//!
//! `#[rimms::api]` declares an [`ApiDecl`] and `#[rimms::kernel(api = …, device = …)]`
//! submits a [`KernelImpl`]; both register themselves with `inventory`, so an implementation
//! in any crate of the program is found without a central list. The table is read once, into
//! arrays indexed by API and device kind, so a call finds its implementation (and the
//! implementation's `accepts` check, if it has one) with two loads.

use super::access::Access;
use crate::hal::{ArgForm, Forms};
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::hal::DeviceKind;

/// A declared API: its name and, once registered, its index in the per-API counters.
pub struct ApiDecl {
    name: &'static str,
    /// Filled on first use from the registry: [`UNRESOLVED`] until then, [`UNREGISTERED`] for
    /// an API that was never registered (not counted per API; remembered, so such an API's
    /// calls do not hash the registry's map every time).
    index: AtomicUsize,
}

impl ApiDecl {
    /// An API named `name`; register it with [`ApiRegistration`] to count its calls.
    pub const fn new(name: &'static str) -> ApiDecl {
        ApiDecl {
            name,
            index: AtomicUsize::new(UNRESOLVED),
        }
    }

    /// The API's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Index in the per-API counters, or `usize::MAX` for an unregistered API.
    #[inline]
    pub(crate) fn index(&'static self) -> usize {
        let index = self.index.load(Ordering::Relaxed);
        if index < UNREGISTERED {
            return index;
        }
        if index == UNREGISTERED {
            return usize::MAX;
        }
        match registry().api_index(self) {
            Some(index) => {
                self.index.store(index, Ordering::Relaxed);
                index
            }
            None => {
                self.index.store(UNREGISTERED, Ordering::Relaxed);
                usize::MAX
            }
        }
    }
}

/// [`ApiDecl::index`] not looked up yet.
const UNRESOLVED: usize = usize::MAX;
/// [`ApiDecl::index`] looked up and not in the registry.
const UNREGISTERED: usize = usize::MAX - 1;

impl std::fmt::Debug for ApiDecl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// What `#[rimms::api]` registers.
pub struct ApiRegistration(pub &'static ApiDecl);

/// What `#[rimms::kernel(api = …, device = …)]` registers: an implementation of `api` for one
/// device kind, as a function pointer of the API's signature (or its device form) behind
/// `dyn Any` (the call site downcasts it to the signature it was compiled against, so a
/// mismatch is an error, never undefined behaviour).
pub struct KernelImpl {
    /// The API implemented.
    pub api: &'static ApiDecl,
    /// The device kind it runs on.
    pub device: DeviceKind,
    /// How it takes its managed arguments.
    pub form: ArgForm,
    /// A `fn(...)` of the API's signature.
    pub func: &'static (dyn Any + Send + Sync),
    /// Its `accepts` check, a `fn` of the API's [`ApiSpec::Accepts`] type: whether the device
    /// takes a call (its limits), asked before anything moves. `None`: it takes every call.
    pub accepts: Option<&'static (dyn Any + Send + Sync)>,
}

/// What the registry holds for one API, device kind and form.
#[derive(Clone, Copy)]
pub(crate) struct Registered {
    /// How it takes its managed arguments ([`KernelImpl::form`]): what dispatch hands it.
    pub form: ArgForm,
    /// The implementation ([`KernelImpl::func`]).
    pub func: &'static (dyn Any + Send + Sync),
    /// Its check ([`KernelImpl::accepts`]).
    pub accepts: Option<&'static (dyn Any + Send + Sync)>,
}

inventory::collect!(ApiRegistration);
inventory::collect!(KernelImpl);

/// The type-level description of an API that the macros generate and check against.
pub trait ApiSpec {
    /// The function-pointer type every host implementation must coerce to.
    type Signature: Copy + 'static;
    /// The same with device slices for slices: what device implementations coerce to.
    type DeviceSignature: Copy + 'static;
    /// The `fn` pointer type an implementation's `accepts` check coerces to: the device's
    /// [`DeviceCtx`](super::DeviceCtx), then the API's parameters in order without the kernel
    /// context, each value as it is and each buffer as its length in elements; it returns
    /// `Result<(), Refusal>`.
    type Accepts: Copy + 'static;
    /// The access mode of each managed argument, in order.
    const MODES: &'static [Access];
    /// The declaration.
    fn decl() -> &'static ApiDecl;
    /// The API's implementations as its two signatures (one static per API, beside the
    /// declaration): what a call looks its implementation up in.
    fn implementations() -> &'static TypedImpls<Self::Signature, Self::DeviceSignature>;
}

/// One API's registered implementations as the signatures its callers are compiled against:
/// the registry's slots of the API, each implementation downcast once, on the API's first
/// call. A call then finds its implementation with a load, where a downcast per call was a
/// `type_id` call through the `dyn Any` and a 16-byte compare (`benches/per_call_instructions.rs`).
/// The macros make one per API, beside its declaration ([`ApiSpec::implementations`]).
pub struct TypedImpls<H: 'static, D: 'static> {
    decl: &'static ApiDecl,
    slots: OnceLock<[Option<TypedImpl<H, D>>; SLOTS]>,
}

/// A registered implementation as its API's signature for its form.
pub(crate) struct TypedImpl<H: 'static, D: 'static> {
    /// The implementation, or `None` where it was registered with another signature than the
    /// API's (by hand: the macros check signatures at compile time).
    pub func: Option<Typed<H, D>>,
    /// Its check ([`KernelImpl::accepts`]).
    pub accepts: Option<&'static (dyn Any + Send + Sync)>,
}

/// An implementation as one of its API's two signatures: what dispatch hands its arguments in.
pub(crate) enum Typed<H: 'static, D: 'static> {
    Host(&'static H),
    Device(&'static D),
}

// By hand: derived, they would ask `H: Clone` and `D: Clone` of the references' targets.
impl<H, D> Clone for Typed<H, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<H, D> Copy for Typed<H, D> {}

impl<H: Any, D: Any> TypedImpls<H, D> {
    /// The implementations of `decl`, looked up on first use.
    pub const fn new(decl: &'static ApiDecl) -> Self {
        TypedImpls {
            decl,
            slots: OnceLock::new(),
        }
    }

    /// The declaration.
    #[inline]
    pub(crate) fn decl(&self) -> &'static ApiDecl {
        self.decl
    }

    /// The implementation a `kind` device taking `forms` runs, as [`Registry::registered`]
    /// finds it.
    #[inline]
    pub(crate) fn registered(&self, kind: DeviceKind, forms: Forms) -> Option<&TypedImpl<H, D>> {
        pick(self.slots.get_or_init(|| self.downcast()), kind, forms)
    }

    #[cold]
    fn downcast(&self) -> [Option<TypedImpl<H, D>>; SLOTS] {
        let registered = registry().impls.get(self.decl.index());
        std::array::from_fn(|slot| {
            let r = registered?[slot]?;
            let func = match r.form {
                ArgForm::Host => r.func.downcast_ref::<H>().map(Typed::Host),
                ArgForm::Device => r.func.downcast_ref::<D>().map(Typed::Device),
            };
            Some(TypedImpl {
                func,
                accepts: r.accepts,
            })
        })
    }
}

/// The registry, read once from inventory.
pub(crate) struct Registry {
    apis: Vec<&'static ApiDecl>,
    by_address: HashMap<usize, usize>,
    /// Per API, one slot per device kind and form.
    impls: Vec<[Option<Registered>; SLOTS]>,
}

const SLOTS: usize = DeviceKind::COUNT * ArgForm::COUNT;

fn slot(kind: DeviceKind, form: ArgForm) -> usize {
    kind.index() * ArgForm::COUNT + form.index()
}

/// The slot a `kind` device taking `forms` runs: the first of `forms` that has one. A
/// reference, not a copy: this is on every call's path.
#[inline]
fn pick<T>(slots: &[Option<T>; SLOTS], kind: DeviceKind, forms: Forms) -> Option<&T> {
    match forms {
        Forms::Only(form) => slots[slot(kind, form)].as_ref(),
        Forms::DeviceThenHost => slots[slot(kind, ArgForm::Device)]
            .as_ref()
            .or(slots[slot(kind, ArgForm::Host)].as_ref()),
    }
}

pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut apis: Vec<&'static ApiDecl> = inventory::iter::<ApiRegistration>
            .into_iter()
            .map(|r| r.0)
            .collect();
        apis.sort_by_key(|a| (a.name, *a as *const ApiDecl as usize));
        apis.dedup_by_key(|a| *a as *const ApiDecl as usize);
        let by_address: HashMap<usize, usize> = apis
            .iter()
            .enumerate()
            .map(|(i, a)| (*a as *const ApiDecl as usize, i))
            .collect();
        let mut impls = vec![[None; SLOTS]; apis.len()];
        for k in inventory::iter::<KernelImpl> {
            match by_address.get(&(k.api as *const ApiDecl as usize)) {
                Some(&i) => {
                    impls[i][slot(k.device, k.form)] = Some(Registered {
                        form: k.form,
                        func: k.func,
                        accepts: k.accepts,
                    })
                }
                None => tracing::warn!(api = k.api.name, "kernel for an unregistered API ignored"),
            }
        }
        Registry {
            apis,
            by_address,
            impls,
        }
    })
}

impl Registry {
    pub(crate) fn api_count(&self) -> usize {
        self.apis.len()
    }

    pub(crate) fn apis(&self) -> &[&'static ApiDecl] {
        &self.apis
    }

    fn api_index(&self, api: &'static ApiDecl) -> Option<usize> {
        self.by_address
            .get(&(api as *const ApiDecl as usize))
            .copied()
    }

    /// The implementation of API number `index` a `kind` device taking `forms` runs.
    #[inline]
    pub(crate) fn implementation(
        &self,
        index: usize,
        kind: DeviceKind,
        forms: Forms,
    ) -> Option<&'static (dyn Any + Send + Sync)> {
        self.registered(index, kind, forms).map(|r| r.func)
    }

    /// The implementation of API number `index` a `kind` device taking `forms` runs, with its
    /// check and form: the first of `forms` that has one.
    #[inline]
    pub(crate) fn registered(
        &self,
        index: usize,
        kind: DeviceKind,
        forms: Forms,
    ) -> Option<&Registered> {
        pick(self.impls.get(index)?, kind, forms)
    }

    /// The kinds (and forms) that implement API number `index`, for error messages:
    /// `[Cpu, Sim, Gpu (device slices)]`.
    pub(crate) fn describe(&self, index: usize) -> String {
        let found: Vec<String> = DeviceKind::ALL
            .into_iter()
            .flat_map(|k| ArgForm::ALL.map(|f| (k, f)))
            .filter(|&(k, f)| self.implementation(index, k, Forms::Only(f)).is_some())
            .map(|(k, f)| match f {
                ArgForm::Host => format!("{k:?}"),
                ArgForm::Device => format!("{k:?} (device slices)"),
            })
            .collect();
        format!("[{}]", found.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HOST_CODE: u8 = 1;
    static DEVICE_CODE: u8 = 2;

    /// A registry of one API with an FPGA implementation in each of `forms`.
    fn one_api(forms: &[ArgForm]) -> Registry {
        let mut slots = [None; SLOTS];
        for &form in forms {
            let func: &'static (dyn Any + Send + Sync) = match form {
                ArgForm::Host => &HOST_CODE,
                ArgForm::Device => &DEVICE_CODE,
            };
            slots[slot(DeviceKind::Fpga, form)] = Some(Registered {
                form,
                func,
                accepts: None,
            });
        }
        Registry {
            apis: Vec::new(),
            by_address: HashMap::new(),
            impls: vec![slots],
        }
    }

    fn found(reg: &Registry, forms: Forms) -> Option<ArgForm> {
        let r = reg.registered(0, DeviceKind::Fpga, forms)?;
        // What dispatch hands the implementation must be the form it was registered in.
        let code = *r.func.downcast_ref::<u8>().expect("a test implementation");
        assert_eq!(code, if r.form == ArgForm::Host { 1 } else { 2 });
        Some(r.form)
    }

    /// A board device takes the device-slice implementation where there is one and host code
    /// otherwise; a device of one form never gets the other's.
    #[test]
    fn each_device_finds_the_first_form_it_takes() {
        use ArgForm::{Device, Host};
        let both = one_api(&[Host, Device]);
        assert_eq!(found(&both, Forms::DeviceThenHost), Some(Device));
        assert_eq!(found(&both, Forms::Only(Host)), Some(Host));
        assert_eq!(found(&both, Forms::Only(Device)), Some(Device));
        let host_only = one_api(&[Host]);
        assert_eq!(found(&host_only, Forms::DeviceThenHost), Some(Host));
        assert_eq!(found(&host_only, Forms::Only(Device)), None);
        let device_only = one_api(&[Device]);
        assert_eq!(found(&device_only, Forms::Only(Host)), None);
        assert_eq!(found(&one_api(&[]), Forms::DeviceThenHost), None);
        assert!(!Forms::Only(Device).runs_host_code());
        assert!(Forms::DeviceThenHost.runs_host_code() && Forms::Only(Host).runs_host_code());
    }
}
