//! A merge rule that calls back into the runtime. A user merge rule is user code run where a
//! device's turn is held (by the scope's own thread when it closes the scope on an idle
//! device, or by the device's worker): a rule that opens a nested scope and sends a job to
//! that very device must still finish, the nested job running inline on the turn holder. A
//! hang here fails after a bound, not forever.

use rimms_runtime::{ApiDecl, Device, HeteData, Joins, KernelArg, MergeRule, Runtime, SimConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::time::Duration;

/// Far above any hand-off; a deadlock is reported when this passes.
const PATIENCE: Duration = Duration::from_secs(30);

/// Elements of every call the rule below ran, in the order they ran (one entry per call).
static RULE_CALLS: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
/// Nested jobs that ran.
static NESTED_RAN: AtomicUsize = AtomicUsize::new(0);

static NESTING_DOUBLE: ApiDecl = ApiDecl::new("nesting_double");

/// `out = 2 · input` for u32 rows, whose rule first opens a scope of its own and sends a job
/// to the device the (merged) call runs on, then runs the kernel on the host.
static NESTING_RULES: &[&MergeRule] = &[&MergeRule {
    api: &NESTING_DOUBLE,
    runs_as: &NESTING_DOUBLE,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, _params, args| {
        rt.scope(|s| {
            s.spawn_on(device, |_| {
                NESTED_RAN.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        })?;
        let (input, mut out) = (args.input::<u32>(0)?, args.output::<u32>(1)?);
        RULE_CALLS.lock().expect("calls").push(input.len());
        rt.launch_host(
            Device::Cpu,
            &NESTING_DOUBLE,
            [
                KernelArg::read("input", &input),
                KernelArg::write("out", &mut out),
            ],
            |[i, o]| {
                for (o, i) in o
                    .into_slice_mut::<u32>()?
                    .iter_mut()
                    .zip(i.into_slice::<u32>()?)
                {
                    *o = 2 * i;
                }
                Ok(())
            },
        )
    },
}];

/// Four 4 KiB rows (a fragment each) submitted to sim0 merge into one call whose rule nests a
/// scope on sim0: run by the scope's thread on the idle device when the body returns, and run
/// by sim0's worker behind a job that keeps the device busy at that moment. Both finish, with
/// every row doubled and the rows merged into one call.
#[test]
fn a_merge_rule_that_nests_a_scope_on_its_own_device_finishes() {
    for busy in [false, true] {
        RULE_CALLS.lock().expect("calls").clear();
        NESTED_RAN.store(0, Ordering::SeqCst);
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let rt = Runtime::builder()
                .sim(SimConfig::default())
                .build()
                .expect("rt");
            let x = HeteData::from_slice(&rt, &(0..4096u32).collect::<Vec<_>>()).expect("x");
            let mut y = HeteData::<u32>::alloc(&rt, 4096).expect("y");
            let (rows, mut outs) = (x.rows(1024).expect("rows"), y.rows_mut(1024).expect("rows"));
            rt.scope(|s| {
                if busy {
                    s.spawn_on(Device::Sim(0), |_| {
                        std::thread::sleep(Duration::from_millis(50));
                        Ok(())
                    });
                }
                for (row, out) in rows.iter().zip(outs.iter_mut()) {
                    s.call(
                        Device::Sim(0),
                        NESTING_RULES,
                        [0, 0],
                        [KernelArg::read("input", row), KernelArg::write("out", out)],
                    )?;
                }
                Ok::<(), rimms_runtime::Error>(())
            })
            .expect("scope")
            .expect("calls");
            let doubled = y
                .host()
                .expect("y")
                .iter()
                .enumerate()
                .all(|(i, &v)| v == 2 * i as u32);
            tx.send(doubled).expect("receiver");
        });
        let doubled = rx.recv_timeout(PATIENCE).unwrap_or_else(|_| {
            panic!("deadlock: a merge rule nesting a scope on its device (busy: {busy})")
        });
        assert!(doubled, "busy: {busy}");
        let calls = std::mem::take(&mut *RULE_CALLS.lock().expect("calls"));
        assert_eq!(
            calls,
            [4096],
            "one merged call of the four rows (busy: {busy})"
        );
        assert_eq!(NESTED_RAN.load(Ordering::SeqCst), 1, "busy: {busy}");
    }
}
