//! A mutational fuzzer over WGSL for the bind-time analyses of this crate: every mutated kernel that
//! naga reads and validates is compiled as binding does (the access offsets, the fused-body check with
//! its uniformity analysis, the tile check's view) and, where the tile check can read it, checked
//! against random maps on random launches. Nothing may panic; every refusal is an error. Inputs:
//! `OSTINATO_WGSL_FUZZ` (default 1,500, what CI runs), seed `OSTINATO_WGSL_FUZZ_SEED`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ostinato::rng::XorShift64;
use ostinato::{Access, KernelSig, Launch, Scalar, ScalarType, TileMap, TileRange};

use crate::kernel::compile_wgsl;

/// Fragments a mutation splices in: built-ins, extreme values, operators, control flow, barriers.
const DICTIONARY: &[&str] = &[
    "wid.x",
    "wid.y",
    "l.x",
    "l.y",
    "0u",
    "1u",
    "7u",
    "64u",
    "4294967295u",
    "2147483647",
    "-1",
    "*",
    "/",
    "%",
    ">>",
    "<<",
    "&",
    "+",
    "-",
    "workgroupBarrier();",
    "storageBarrier();",
    "return;",
    "if (l.x < 3u) {",
    "if (wid.x > 1u) {",
    "}",
    "break;",
    "continue;",
    "loop {",
    "for (var q = 0u; q < 9u; q = q + 1u) {",
    "for (var q = l.x; q < 9u; q = q + 2u) {",
    "x[0]",
    "x[l.x]",
    "p.n",
    "(",
    ")",
    ";",
];

/// The seeds: the test kernels of this module and the built-ins' WGSL.
fn seeds() -> Vec<String> {
    let mut v = vec![
        "struct Params { n: u32, m: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read> y: array<u32>;
var<immediate> p: Params;
var<workgroup> t: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    var s = 0u;
    for (var c = l.x; c < p.n; c = c + 64u) { s = s + y[wid.x * p.n + c]; }
    t[l.x] = s;
    for (var o = 32u; o > 0u; o = o >> 1u) { workgroupBarrier(); if (l.x < o) { t[l.x] = t[l.x] + t[l.x + o]; } }
    workgroupBarrier();
    if (wid.x < p.m) { x[wid.x * 64u + l.x] = t[0] * 3u + l.y; }
}"
        .to_string(),
        "struct Params { n: u32, m: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read> y: array<u32>;
var<immediate> p: Params;
@compute @workgroup_size(8, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    let i = (wid.y * 8u + l.y) * p.n + wid.x * 8u + l.x;
    x[i] = (x[i] ^ y[i % p.m]) * 5u;
}"
        .to_string(),
    ];
    v.extend(["add_one", "mix", "rmsnorm", "gemv", "rope", "kv_store", "attention", "add", "silu_mul"].iter().filter_map(|k| crate::shaders::wgsl(k)));
    v
}

/// `src` with one to four fragments replaced, inserted or deleted at token boundaries.
fn mutate(src: &str, rng: &mut XorShift64) -> String {
    let mut tokens: Vec<String> = src.split_inclusive(|c: char| c.is_whitespace() || "()[]{};,.".contains(c)).map(str::to_string).collect();
    for _ in 0..1 + rng.below(4) {
        if tokens.is_empty() {
            break;
        }
        let at = rng.below(tokens.len() as u64) as usize;
        let word = DICTIONARY[rng.below(DICTIONARY.len() as u64) as usize].to_string() + " ";
        match rng.below(3) {
            0 => tokens[at] = word,
            1 => tokens.insert(at, word),
            _ => {
                tokens.remove(at);
            }
        }
    }
    tokens.concat()
}

/// A signature matching the module's storage bindings (read_write buffers) and its scalars (u32s).
fn signature(module: &naga::Module) -> KernelSig {
    let buffers = module.global_variables.iter().filter(|(_, v)| matches!(v.space, naga::AddressSpace::Storage { .. })).count();
    let scalars = module.global_variables.iter().find(|(_, v)| v.space == naga::AddressSpace::Immediate).map_or(0, |(_, v)| {
        if let naga::TypeInner::Struct { members, .. } = &module.types[v.ty].inner {
            members.len()
        } else {
            0
        }
    });
    let mut sig = KernelSig::new("fuzzed");
    for b in 0..buffers {
        sig = sig.buffer(format!("b{b}"), Access::ReadWrite);
    }
    for s in 0..scalars {
        sig = sig.scalar(format!("s{s}"), ScalarType::U32);
    }
    sig
}

#[test]
fn mutated_wgsl_never_panics_the_bind_time_analyses() {
    let inputs: u64 = std::env::var("OSTINATO_WGSL_FUZZ").ok().and_then(|v| v.parse().ok()).unwrap_or(1_500);
    let seed: u64 = std::env::var("OSTINATO_WGSL_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let seeds = seeds();
    let mut rng = XorShift64::seeded(seed);
    let (mut valid, mut checked, mut verified) = (0u64, 0u64, 0u64);
    for i in 0..inputs {
        let src = mutate(&seeds[rng.below(seeds.len() as u64) as usize], &mut rng);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let Ok(module) = crate::wgsl::parse(&src) else { return (false, 0, 0) };
            let sig = signature(&module);
            let Ok(c) = compile_wgsl(&sig, &src, "main") else { return (false, 0, 0) };
            let Ok(tiles) = c.tiles else { return (true, 0, 0) };
            let block = c.workgroup.unwrap_or([64, 1, 1]);
            let (mut n, mut ok) = (0, 0);
            for _ in 0..4 {
                let grid = [1 + rng.below(9) as u32, 1 + rng.below(3) as u32, 1];
                let stride = [4 * rng.below(300), 4 * rng.below(50), 0];
                let map = TileMap::new(vec![TileRange::span(4 * rng.below(4), stride, 4 + 4 * rng.below(400))]).expect("a valid map");
                let scalars: Vec<Option<Scalar>> = (0..sig.params.len()).map(|_| (rng.below(5) != 0).then(|| Scalar::u32(rng.below(1000) as u32))).collect();
                for b in 0..c.offsets.bindings.len() {
                    n += 1;
                    ok += u64::from(tiles.check(b, &map, &Launch::new(grid, block), &scalars).is_ok());
                }
            }
            (true, n, ok)
        }));
        match r {
            Ok((v, n, ok)) => {
                valid += u64::from(v);
                checked += n;
                verified += ok;
            }
            Err(_) => panic!("input {i} (seed {seed}) panicked:\n{src}"),
        }
    }
    assert!(valid > inputs / 20, "{valid} of {inputs} mutants compiled: the fuzzer barely reaches the analyses");
    eprintln!("wgsl fuzz: {inputs} mutants, {valid} compiled, {checked} map checks ({verified} verified), no panic");
}

/// A kernel with an expression just within the statement limit compiles from a thread of 256 KiB:
/// naga's front end and `naga_oil`'s importer (the offsets' rewrite) run on a stack of their own
/// (on such a thread itself they overflow it at 990 terms).
#[test]
fn a_long_expression_compiles_from_a_small_stack() {
    let src = format!(
        "struct Params {{ n: u32 }}\n@group(0) @binding(0) var<storage, read_write> x: array<u32>;\nvar<immediate> p: Params;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) l: vec3<u32>) {{\n    x[l.x] = {};\n}}\n",
        vec!["l.x"; 990].join(" + ")
    );
    let sig = KernelSig::new("k").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let compiled = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || compile_wgsl(&sig, &src, "main").map(|c| (c.words.len(), c.body.is_ok())).map_err(|e| e.to_string()))
        .unwrap()
        .join()
        .expect("no stack overflow");
    assert!(matches!(compiled, Ok((n, true)) if n > 0), "{compiled:?}");
}
