//! Errors in the middle of a scope: a merged call of held rows that fails after it wrote
//! part of its output runs again row by row, and the rows end as those calls wrote them, with
//! no copy of the failed write left valid anywhere.

use std::sync::atomic::{AtomicUsize, Ordering};

use rimms::{ApiDecl, Device, Error, HeteData, Joins, KernelArg, MergeRule, Runtime, SimConfig};

const ROW: usize = 16;
const ROWS: usize = 4;

/// Merged calls [`DOUBLE_RULES`] failed (only this file's one test uses them).
static FAILED_MERGES: AtomicUsize = AtomicUsize::new(0);

static DOUBLE: ApiDecl = ApiDecl::new("scope_errors_double");
/// `out = 2 · input` on u32; a call over more than one row (a merged call) writes garbage
/// into its output and fails.
static DOUBLE_RULES: &[&MergeRule] = &[&MergeRule {
    api: &DOUBLE,
    runs_as: &DOUBLE,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, _, args| {
        let (input, mut out) = (args.input::<u32>(0)?, args.output::<u32>(1)?);
        let args = [
            KernelArg::read("input", &input),
            KernelArg::write("out", &mut out),
        ];
        rt.launch_host(device, &DOUBLE, args, |[i, o]| {
            let (i, o) = (i.into_slice::<u32>()?, o.into_slice_mut::<u32>()?);
            if o.len() > ROW {
                o[..ROW].fill(0xDEAD);
                FAILED_MERGES.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Config("a merged call that fails part-way".into()));
            }
            o.iter_mut().zip(i).for_each(|(o, i)| *o = 2 * i);
            Ok(())
        })
    },
}];

#[test]
fn a_merged_call_that_fails_part_way_runs_again_row_by_row_and_keeps_nothing_of_its_write() {
    for device in [Device::Cpu, Device::Sim(0)] {
        let rt = Runtime::builder()
            .sim(SimConfig::default())
            .build()
            .expect("runtime");
        let x: Vec<u32> = (0..(ROW * ROWS) as u32).collect();
        let mut xs = HeteData::from_slice(&rt, &x).expect("x");
        xs.fragment(ROW * 4).expect("a row per fragment");
        let mut ys = HeteData::from_slice(&rt, &[7u32; ROW * ROWS]).expect("y");
        ys.fragment(ROW * 4).expect("a row per fragment");
        let outcome = {
            let (rows, mut outs) = (xs.rows(ROW).expect("rows"), ys.rows_mut(ROW).expect("rows"));
            rt.scope(|s| {
                for (row, out) in rows.iter().zip(outs.iter_mut()) {
                    let args = [KernelArg::read("input", row), KernelArg::write("out", out)];
                    s.call(device, DOUBLE_RULES, [0, 0], args)?;
                }
                Ok::<(), Error>(())
            })
        };
        outcome
            .expect("scope")
            .expect("the rows ran again one by one");
        let failed = FAILED_MERGES.swap(0, Ordering::Relaxed);
        assert_eq!(
            failed, 1,
            "on {device}: the merged call ran and failed once"
        );
        ys.validate().expect("no valid copy differs");
        let want: Vec<u32> = x.iter().map(|v| 2 * v).collect();
        assert_eq!(ys.to_vec().expect("y"), want, "on {device}");
    }
}
