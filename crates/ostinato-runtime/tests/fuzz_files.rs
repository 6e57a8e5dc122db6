//! A stable mutational fuzzer over the example graph files: every mutated input is parsed, planned
//! and (when small) run on the host backend in serial order with the race checker on. Any panic is a
//! failure; every refusal must be an error with a message. `OSTINATO_FUZZ_INPUTS` sets the count
//! (default 10,000, what CI runs); `OSTINATO_FUZZ_SEED` the seed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use ostinato::file;
use ostinato::rng::XorShift64;
use ostinato::Plan;
use ostinato_runtime::{BackendKind, BackendSpec, Session};

/// Tokens a mutation may splice in: the values that broke earlier versions, and TOML structure.
const DICTIONARY: &[&str] = &[
    "9223372036854775807",
    "9223372036854775808",
    "40000000000",
    "1e15",
    "4294967295",
    "4294967296",
    "-1",
    "0",
    "repeat = 941000",
    "repeat = 4294967295",
    "repeat = 0",
    "size = 0",
    "\"../escaped\"",
    "\"/abs/path\"",
    "\"a\\nb\"",
    "[[node]]",
    "[[buffer]]",
    "[[kernel]]",
    "[[slot]]",
    "after = [0]",
    "after = [1000000]",
    "grid = [65536, 65536, 65536]",
    "block = [2048, 1, 1]",
    "view = { of = \"a\", offset = 4, len = 8 }",
    "{ slot = \"salt\" }",
    "access = \"write\"",
    "scalar = \"f64\"",
    "init = \"random:7\"",
    "host = 3",
    "cuda = { source = 1 }",
];

/// The most nodes and bytes a mutated input may have to be run (bigger ones are only planned).
const RUN_NODES: usize = 200;
const RUN_BYTES: u64 = 1 << 20;

fn mutate(seed: &str, others: &[String], r: &mut XorShift64) -> String {
    let mut lines: Vec<String> = seed.lines().map(str::to_string).collect();
    for _ in 0..1 + r.below(4) {
        let at = r.below(lines.len().max(1) as u64) as usize;
        match r.below(7) {
            0 if !lines.is_empty() => {
                lines.remove(at.min(lines.len() - 1));
            }
            1 if !lines.is_empty() => {
                let l = lines[at.min(lines.len() - 1)].clone();
                lines.insert(at, l);
            }
            2 => lines.insert(at.min(lines.len()), DICTIONARY[r.below(DICTIONARY.len() as u64) as usize].to_string()),
            3 if !lines.is_empty() => {
                // Replace a number or string value on the line with a dictionary token.
                let i = at.min(lines.len() - 1);
                if let Some(eq) = lines[i].find('=') {
                    lines[i] = format!("{}= {}", &lines[i][..eq], DICTIONARY[r.below(DICTIONARY.len() as u64) as usize]);
                }
            }
            4 if !lines.is_empty() => {
                // Flip one byte to a printable neighbour.
                let i = at.min(lines.len() - 1);
                let mut b = lines[i].clone().into_bytes();
                if !b.is_empty() {
                    let j = r.below(b.len() as u64) as usize;
                    b[j] = b' ' + (r.below(95) as u8);
                    lines[i] = String::from_utf8_lossy(&b).into_owned();
                }
            }
            5 => {
                // Splice a line of another example in.
                let o = &others[r.below(others.len() as u64) as usize];
                let ol: Vec<&str> = o.lines().collect();
                if !ol.is_empty() {
                    lines.insert(at.min(lines.len()), ol[r.below(ol.len() as u64) as usize].to_string());
                }
            }
            _ => {}
        }
    }
    lines.join("\n")
}

/// Parses, plans and (when small) runs one input; `Err` is a refusal with its message.
fn exercise(src: &str) -> Result<(), String> {
    let keys = BackendKind::names();
    let f = file::parse(src, Path::new("examples/fuzzed.toml"), &keys).map_err(|e| e.to_string())?;
    let plan = Plan::compile(&f.graph).map_err(|e| f.plan_error(&e).to_string())?;
    let bytes: u64 = f.graph.buffers().iter().map(|b| b.size).sum();
    if plan.node_count() > RUN_NODES || bytes > RUN_BYTES {
        return Ok(());
    }
    let session = Session::open(&BackendSpec::Host { threads: Some(0), check_races: true }).map_err(|e| e.to_string())?;
    let mut exec = session.instantiate_file(&f, &plan).map_err(|e| e.to_string())?;
    exec.write_inits(&f.inits).map_err(|e| e.to_string())?;
    exec.replay().map_err(|e| e.to_string())?;
    exec.wait().map_err(|e| e.to_string())
}

#[test]
fn mutated_graph_files_never_panic() {
    let inputs: u64 = std::env::var("OSTINATO_FUZZ_INPUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let seed: u64 = std::env::var("OSTINATO_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x0f22);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seeds: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 3, "the examples seed the fuzzer");
    // Silence the default hook: a caught panic is counted and reported below, with its input.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut r = XorShift64::seeded(seed);
    let (mut refused, mut ran, mut panics) = (0u64, 0u64, Vec::new());
    let t = std::time::Instant::now();
    for i in 0..inputs {
        let src = mutate(&seeds[(i % seeds.len() as u64) as usize], &seeds, &mut r);
        match catch_unwind(AssertUnwindSafe(|| exercise(&src))) {
            Ok(Ok(())) => ran += 1,
            Ok(Err(message)) => {
                assert!(!message.trim().is_empty(), "input {i}: a refusal without a message:\n{src}");
                refused += 1;
            }
            Err(_) => panics.push((i, src)),
        }
    }
    std::panic::set_hook(hook);
    eprintln!(
        "fuzz: {inputs} inputs in {:.1} s (seed {seed:#x}): {ran} ran or planned, {refused} refused with a message, {} panicked",
        t.elapsed().as_secs_f64(),
        panics.len()
    );
    if let Some((i, src)) = panics.first() {
        panic!("{} of {inputs} inputs panicked; the first, input {i}:\n{src}", panics.len());
    }
}
