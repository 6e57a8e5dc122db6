//! A stable mutational fuzzer over the example graph files: every mutated input is parsed, planned
//! and (when small) run on the host backend in serial order with the race checker on; every
//! `OSTINATO_FUZZ_VULKAN_EVERY`-th input that ran there also runs on Vulkan (lavapipe in CI) and must
//! give the host's bytes. The dictionary holds what broke earlier versions: multi-dimensional grids,
//! params of one launch overlapping, built-ins told to touch past their extents, slices at offsets no
//! binding reaches, huge counts. Any panic or mismatch is a failure; every refusal must be an error
//! with a message.
//!
//! Environment: `OSTINATO_FUZZ_INPUTS` (default 10,000, what CI runs), `OSTINATO_FUZZ_SEED`,
//! `OSTINATO_FUZZ_START` (the first input's index: a campaign runs in chunks, `scripts/fuzz-campaign.sh`),
//! `OSTINATO_FUZZ_VULKAN_EVERY` (default 50; 0: never), `OSTINATO_FUZZ_PROGRESS` (a file the index of
//! the input being run is written to, so a supervisor can name the input a dying process was on),
//! `OSTINATO_FUZZ_PRINT` (print each input before it runs: to see what one input is).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use ostinato::file;
use ostinato::rng::XorShift64;
use ostinato::Plan;
use ostinato_runtime::{BackendKind, BackendSpec, ExecHandle, Session};

/// Tokens a mutation may splice in: the values that broke earlier versions, and TOML structure.
const DICTIONARY: &[&str] = &[
    "9223372036854775807",
    "9223372036854775808",
    "40000000000",
    "1e15",
    "4294967295",
    "4294967296",
    "2147483648",
    "-1",
    "0",
    "512",
    "100000",
    "repeat = 941000",
    "repeat = 4294967295",
    "repeat = 0",
    "repeat = 3",
    "size = 0",
    "size = 4",
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
    "grid = [4294967295]",
    "grid = [1, 2]",
    "grid = [2, 2, 2]",
    "grid = [1, 1, 3]",
    "block = [2048, 1, 1]",
    "block = [16, 16]",
    "block = [1]",
    "view = { of = \"a\", offset = 4, len = 8 }",
    "view = { of = \"a\", offset = 44, len = 2600 }",
    "view = { of = \"a\", offset = 260, len = 1024 }",
    "{ buffer = \"a\", offset = 44, len = 1024 }",
    "{ buffer = \"a\", offset = 160, len = 3376 }",
    "{ buffer = \"a\", offset = 0, len = 512 }",
    "{ buffer = \"a\", offset = 2600, len = 1496 }",
    "{ buffer = \"b\", offset = 6, len = 10 }",
    "out = \"a\"",
    "inp = \"a\"",
    "n = 512",
    "n_out = 100000",
    "n_in = 0",
    "alias = [[\"out\", \"inp\"]]",
    "alias = [[\"out\"]]",
    "{ slot = \"salt\" }",
    "access = \"write\"",
    "access = \"infer\"",
    "vouched = true",
    "scalar = \"f64\"",
    "init = \"random:7\"",
    "shared = 300000",
    "host = 3",
    "cuda = { source = 1 }",
    "vulkan = \"builtin:mix\"",
];

/// The most nodes and bytes a mutated input may have to be run (bigger ones are only planned).
const RUN_NODES: usize = 200;
const RUN_BYTES: u64 = 1 << 20;

fn mutate(seed: &str, others: &[String], r: &mut XorShift64) -> String {
    let mut lines: Vec<String> = seed.lines().map(str::to_string).collect();
    for _ in 0..1 + r.below(4) {
        let at = r.below(lines.len().max(1) as u64) as usize;
        match r.below(8) {
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
            6 if !lines.is_empty() => {
                // Replace one value inside an inline table (`key = value` within `{ ... }`).
                let i = at.min(lines.len() - 1);
                let keys = ["offset", "len", "n", "n_out", "n_in", "grid", "block", "out", "inp", "x"];
                let key = keys[r.below(keys.len() as u64) as usize];
                if let Some(p) = lines[i].find(&format!("{key} = ")) {
                    let start = p + key.len() + 3;
                    let end = lines[i][start..].find([',', '}']).map_or(lines[i].len(), |e| start + e);
                    let token = DICTIONARY[r.below(DICTIONARY.len() as u64) as usize];
                    lines[i] = format!("{}{}{}", &lines[i][..start], token, &lines[i][end..]);
                }
            }
            _ => {}
        }
    }
    lines.join("\n")
}

/// What became of one input.
enum Outcome {
    /// Parsed, planned and, where small enough, run (and, where asked, matched on Vulkan).
    Ran,
    /// Refused with this message.
    Refused(String),
    /// Vulkan's bytes differ from the host oracle's.
    Mismatched(String),
}

/// Every root buffer's bytes after one replay of `file` on `session`.
fn run_on(session: &Session, f: &file::GraphFile, plan: &Plan) -> Result<ostinato_runtime::NamedBuffers, String> {
    let mut exec: Box<dyn ExecHandle> = session.instantiate_file(f, plan).map_err(|e| e.to_string())?;
    exec.write_inits(&f.inits).map_err(|e| e.to_string())?;
    exec.replay().map_err(|e| e.to_string())?;
    exec.wait().map_err(|e| e.to_string())?;
    exec.read_roots().map_err(|e| e.to_string())
}

/// Parses, plans and (when small) runs one input on the host, and on `vulkan` where given.
fn exercise(src: &str, host: &Session, vulkan: Option<&Session>) -> Outcome {
    let keys = BackendKind::names();
    let f = match file::parse(src, Path::new("examples/fuzzed.toml"), &keys) {
        Ok(f) => f,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let plan = match Plan::compile(&f.graph) {
        Ok(p) => p,
        Err(e) => return Outcome::Refused(f.plan_error(&e).to_string()),
    };
    let bytes: u64 = f.graph.buffers().iter().map(|b| b.size).sum();
    if plan.node_count() > RUN_NODES || bytes > RUN_BYTES {
        return Outcome::Ran;
    }
    let want = match run_on(host, &f, &plan) {
        Ok(w) => w,
        Err(e) => return Outcome::Refused(e),
    };
    let Some(vk) = vulkan else { return Outcome::Ran };
    match run_on(vk, &f, &plan) {
        // Vulkan may refuse what it cannot run (no WGSL for a user's kernel, a device limit): a
        // refusal with a message, as the CLI would print it.
        Err(e) => {
            if std::env::var_os("OSTINATO_FUZZ_DEBUG").is_some() {
                eprintln!("vulkan refused: {e}");
            }
            Outcome::Refused(e)
        }
        Ok(got) => match ostinato_runtime::compare(&want, &got) {
            Ok(()) => Outcome::Ran,
            Err(e) => Outcome::Mismatched(e.to_string()),
        },
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn mutated_graph_files_never_panic_and_vulkan_matches_the_host() {
    let inputs = env_u64("OSTINATO_FUZZ_INPUTS", 10_000);
    let seed = env_u64("OSTINATO_FUZZ_SEED", 0x0f22);
    let start = env_u64("OSTINATO_FUZZ_START", 0);
    let vulkan_every = env_u64("OSTINATO_FUZZ_VULKAN_EVERY", 50);
    let progress = std::env::var_os("OSTINATO_FUZZ_PROGRESS");
    let dir = ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}")).join("examples");
    let mut seeds: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 3, "the examples seed the fuzzer");
    let host = Session::open(&BackendSpec::Host { threads: Some(0), check_races: true }).unwrap();
    let vulkan = match Session::open(&BackendSpec::default_for(BackendKind::Vulkan).unwrap()) {
        Ok(s) if vulkan_every > 0 => Some(s),
        Ok(_) => None,
        Err(e) => {
            eprintln!("fuzz: no Vulkan runs ({e})");
            None
        }
    };
    // Silence the default hook: a caught panic is counted and reported below, with its input.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // Each input's generator is seeded by its index, so a chunk of a campaign starting at `start`
    // sees exactly the inputs a single run over all of them would.
    let (mut refused, mut ran, mut vulkan_runs, mut panics, mut mismatches) = (0u64, 0u64, 0u64, Vec::new(), Vec::new());
    let t = std::time::Instant::now();
    for i in start..start + inputs {
        if let Some(p) = &progress {
            let _ = std::fs::write(p, i.to_string());
        }
        let mut r = XorShift64::seeded(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let src = mutate(&seeds[(i % seeds.len() as u64) as usize], &seeds, &mut r);
        if std::env::var_os("OSTINATO_FUZZ_PRINT").is_some() {
            eprintln!("--- input {i}\n{src}\n---");
        }
        // Every `vulkan_every`-th input on average, spread over the seed files (not `i % n`, which would
        // pick one seed file's mutations only).
        let vk = vulkan.as_ref().filter(|_| vulkan_every > 0 && (i.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) % vulkan_every == 0);
        match catch_unwind(AssertUnwindSafe(|| exercise(&src, &host, vk))) {
            Ok(Outcome::Ran) => {
                ran += 1;
                vulkan_runs += u64::from(vk.is_some());
            }
            Ok(Outcome::Refused(message)) => {
                assert!(!message.trim().is_empty(), "input {i}: a refusal without a message:\n{src}");
                refused += 1;
            }
            Ok(Outcome::Mismatched(m)) => mismatches.push((i, m, src)),
            Err(_) => panics.push((i, src)),
        }
    }
    std::panic::set_hook(hook);
    eprintln!(
        "fuzz: inputs {start}..{} in {:.1} s (seed {seed:#x}): {ran} ran or planned ({vulkan_runs} of them also matched on Vulkan), {refused} refused with a message, {} panicked, {} mismatched",
        start + inputs,
        t.elapsed().as_secs_f64(),
        panics.len(),
        mismatches.len()
    );
    if let Some((i, m, src)) = mismatches.first() {
        panic!("{} of {inputs} inputs gave other bytes on Vulkan than on the host; the first, input {i}: {m}\n{src}", mismatches.len());
    }
    if let Some((i, src)) = panics.first() {
        panic!("{} of {inputs} inputs panicked; the first, input {i}:\n{src}", panics.len());
    }
}
