use super::*;
use ostinato::{Access, TileRange};

/// The rows kernels of the tiles family, as a user writes them: 32 × 8 invocations, a row of `n` f32
/// per 8 invocations of y, a `for` over the row's columns; `red` a reduction in workgroup memory.
const ROWS: &str = "struct Params { rows: u32, n: u32 }
@group(0) @binding(0) var<storage, read_write> h: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
var<immediate> p: Params;
var<workgroup> red: array<f32, 256>;

fn row_sum(lx: u32, ly: u32, v: f32) -> f32 {
    let i = ly * 32u + lx;
    red[i] = v;
    for (var o = 16u; o > 0u; o = o >> 1u) {
        workgroupBarrier();
        if (lx < o) { red[i] = red[i] + red[i + o]; }
    }
    workgroupBarrier();
    let s = red[ly * 32u];
    workgroupBarrier();
    return s;
}

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.x * 8u + l.y;
    var s = 0.0;
    if (row < p.rows) {
        for (var c = l.x; c < p.n; c = c + 32u) {
            let v = x[ROW * p.n + c];
            s = s + v * v;
        }
    }
    s = row_sum(l.x, l.y, s);
    if (row < p.rows) {
        for (var c = l.x; c < p.n; c = c + 32u) {
            h[row * p.n + c] = x[row * p.n + c] * w[c] / s;
        }
    }
}";

fn sig() -> KernelSig {
    KernelSig::new("rows")
        .buffer("h", Access::Write)
        .buffer("x", Access::Read)
        .buffer("w", Access::Read)
        .scalar("rows", ScalarType::U32)
        .scalar("n", ScalarType::U32)
}

fn code(src: &str, sig: &KernelSig) -> TileCode {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{}", e.emit_to_string(src)));
    let caps = naga::valid::Capabilities::IMMEDIATES;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&module).unwrap();
    let scalar_offsets: Vec<u32> = (0..sig.params.iter().filter(|p| matches!(p.kind, ParamKind::Scalar(_))).count() as u32).map(|i| 4 * i).collect();
    TileCode::new(&module, info, sig, "main", &scalar_offsets, ParamsAt::Immediate, Some(src)).unwrap()
}

fn rows_map(n: u32) -> TileMap {
    TileMap::linear(32 * u64::from(n), 32 * u64::from(n)).unwrap()
}

fn broadcast(n: u32) -> TileMap {
    TileMap::new(vec![TileRange::span(0, [0, 0, 0], 4 * u64::from(n))]).unwrap()
}

fn scalars(v: &[u32]) -> Vec<Option<Scalar>> {
    v.iter().map(|&x| Some(Scalar::u32(x))).collect()
}

#[test]
fn a_row_kernel_keeps_its_rows_and_a_broadcast_read_its_vector() {
    let c = code(&ROWS.replace("ROW", "row"), &sig());
    let launch = Launch::new([512, 1, 1], [32, 8, 1]);
    let s = scalars(&[4096, 2048]);
    c.check(0, &rows_map(2048), &launch, &s).unwrap();
    c.check(1, &rows_map(2048), &launch, &s).unwrap();
    c.check(2, &broadcast(2048), &launch, &s).unwrap();
    // A map one row short of the kernel's, and a vector one element short, are not kept.
    let short = TileMap::linear(32 * 2048, 28 * 2048).unwrap();
    let e = c.check(0, &short, &launch, &s).unwrap_err();
    assert!(e.contains("line 34") && e.contains("outside its tile"), "{e}");
    assert!(c.check(2, &broadcast(2047), &launch, &s).is_err());
}

#[test]
fn reading_the_next_rows_contradicts_a_map_of_ones_own() {
    let c = code(&ROWS.replace("ROW", "(row + 8u)"), &sig());
    let launch = Launch::new([64, 1, 1], [32, 8, 1]);
    let e = c.check(1, &rows_map(256), &launch, &scalars(&[512, 256])).unwrap_err();
    assert!(e.contains("line 27") && e.contains("outside its tile"), "{e}");
    // The map of both blocks' rows holds it.
    let two = TileMap::linear(32 * 256, 64 * 256).unwrap();
    assert!(c.check(1, &two, &Launch::new([63, 1, 1], [32, 8, 1]), &scalars(&[504, 256])).is_ok());
}

#[test]
fn an_index_the_check_cannot_follow_leaves_the_map_unverified_saying_why() {
    let launch = Launch::new([16, 1, 1], [32, 8, 1]);
    let s = scalars(&[128, 64]);
    // An index loaded from memory.
    let c = code(&ROWS.replace("ROW * p.n + c", "u32(w[c])"), &sig());
    let e = c.check(1, &rows_map(64), &launch, &s).unwrap_err();
    assert!(e.contains("line 27") && e.contains("a value loaded from memory"), "{e}");
    // A scalar from a slot: patchable after the check.
    let c = code(&ROWS.replace("ROW", "row"), &sig());
    let e = c.check(1, &rows_map(64), &launch, &[Some(Scalar::u32(128)), None]).unwrap_err();
    assert!(e.contains("slot"), "{e}");
    // A product of two workgroup-dependent values.
    let c = code(&ROWS.replace("ROW * p.n", "row * wid.x * p.n"), &sig());
    let e = c.check(1, &rows_map(64), &launch, &s).unwrap_err();
    assert!(e.contains("not a form of the workgroup id"), "{e}");
}

#[test]
fn an_index_that_may_wrap_is_not_followed() {
    let c = code(&ROWS.replace("ROW", "row"), &sig());
    // 4,096 rows of 2^21 columns: row · n passes 2^32.
    let e = c.check(1, &rows_map(1 << 21), &Launch::new([512, 1, 1], [32, 8, 1]), &scalars(&[4096, 1 << 21])).unwrap_err();
    assert!(e.contains("wrap"), "{e}");
}

#[test]
fn a_loop_the_check_does_not_recognise_leaves_its_variable_unknown() {
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    var i = l.x;
    loop {
        if (i >= 256u) { break; }
        x[wid.x * 256u + i] = i;
        continuing { i = i * 2u + 64u; }
    }
}";
    let sig = KernelSig::new("k").buffer("x", Access::Write);
    let e = code(src, &sig).check(0, &TileMap::linear(1024, 1024).unwrap(), &Launch::linear(8, 64), &[]).unwrap_err();
    assert!(e.contains("line 7") && e.contains("variable"), "{e}");
    // The same loop stepping by a constant: its counter is [l.x, 256).
    let stepped = src.replace("i * 2u + 64u", "i + 64u");
    code(&stepped, &sig).check(0, &TileMap::linear(1024, 1024).unwrap(), &Launch::linear(8, 64), &[]).unwrap();
}

#[test]
fn a_two_dimensional_tile_is_checked_invocation_by_invocation() {
    // 8 × 8 tiles of a 64-wide u32 image: each workgroup's rows are 32 bytes, 256 bytes apart.
    let src = "@group(0) @binding(0) var<storage, read_write> img: array<u32>;
@compute @workgroup_size(8, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    let i = (wid.y * 8u + l.y) * 64u + wid.x * 8u + l.x;
    img[i] = img[i] + 1u;
}";
    let sig = KernelSig::new("k").buffer("img", Access::ReadWrite);
    let tile = TileMap::new(vec![TileRange::span(0, [32, 8 * 256, 0], 32).with_rows(8, 256)]).unwrap();
    let c = code(src, &sig);
    let launch = Launch::new([8, 8, 1], [8, 8, 1]);
    c.check(0, &tile, &launch, &[]).unwrap();
    // One column short of the tile: invocation (7, 0) of workgroup (0, 0) leaves it.
    let narrow = TileMap::new(vec![TileRange::span(0, [32, 8 * 256, 0], 28).with_rows(8, 256)]).unwrap();
    let e = c.check(0, &narrow, &launch, &[]).unwrap_err();
    assert!(e.contains("invocation [7, 0, 0]"), "{e}");
}

#[test]
fn accesses_in_called_functions_struct_members_and_vectors_are_followed() {
    let src = "struct Buf { count: u32, data: array<vec4<u32>> }
@group(0) @binding(0) var<storage, read_write> b: Buf;
fn bump(i: u32) { b.data[i].y = b.data[i].y + 1u; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { bump(g.x); }";
    let sig = KernelSig::new("k").buffer("b", Access::ReadWrite);
    let c = code(src, &sig);
    // Element i's .y lies at 16 + 16 i + 4: workgroup w's at [16 + 1024 w + 4, ...).
    let map = TileMap::new(vec![TileRange::span(16, [1024, 0, 0], 1024)]).unwrap();
    c.check(0, &map, &Launch::linear(4, 64), &[]).unwrap();
    // The count, which every workgroup could touch, is outside that map: touching it is refused.
    let counting = src.replace("bump(g.x);", "bump(g.x); b.count = 0u;");
    assert!(code(&counting, &sig).check(0, &map, &Launch::linear(4, 64), &[]).unwrap_err().contains("line 5"));
}

#[test]
fn a_pointer_to_a_local_passed_to_a_function_leaves_the_local_unknown() {
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
fn put(p: ptr<function, u32>) { *p = 1u; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { var v = x[g.x]; put(&v); x[g.x] = v; }";
    let sig = KernelSig::new("k").buffer("x", Access::ReadWrite);
    // A pointer to a local: the local is unknown after the call; the accesses are the invocation's own.
    code(src, &sig).check(0, &TileMap::linear(256, 256).unwrap(), &Launch::linear(4, 64), &[]).unwrap();
    // A local the call may change, used as an index: unknown.
    let indexed = src.replace("x[g.x] = v;", "x[v] = 0u;");
    let e = code(&indexed, &sig).check(0, &TileMap::linear(256, 256).unwrap(), &Launch::linear(4, 64), &[]).unwrap_err();
    assert!(e.contains("line 4") && e.contains("called function"), "{e}");
    // (A pointer into the binding passed on is refused as "passed to a function"; naga's WGSL front
    // end does not take storage pointers as parameters yet, SPIR-V can carry them.)
}

#[test]
fn an_offset_that_does_not_move_with_the_map_is_checked_workgroup_by_workgroup() {
    // Workgroup w touches words [64 (w / 2) ...]: pairs of workgroups share a tile.
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) { x[(wid.x / 2u) * 64u + l.x] = 1u; }";
    let sig = KernelSig::new("k").buffer("x", Access::Write);
    let pairs: Vec<TileRange> = vec![TileRange::span(0, [128, 0, 0], 256), TileRange::span(0, [0, 0, 0], 4)];
    let c = code(src, &sig);
    // `wid.x / 2` has no affine form: the access is not followed.
    assert!(c.check(0, &TileMap::new(pairs).unwrap(), &Launch::linear(8, 64), &[]).is_err());
    // A map whose ranges move apart (a shared word beside each workgroup's own): every workgroup
    // is checked on its own.
    let src = src.replace("(wid.x / 2u) * 64u", "wid.x * 64u");
    let own = TileMap::new(vec![TileRange::span(0, [256, 0, 0], 256), TileRange::span(0, [0, 0, 0], 4)]).unwrap();
    code(&src, &sig).check(0, &own, &Launch::linear(8, 64), &[]).unwrap();
    // Workgroup 0 lies in the shared word and its own range; workgroup 1's first word in neither.
    let shifted = TileMap::new(vec![TileRange::span(4, [256, 0, 0], 252), TileRange::span(0, [0, 0, 0], 4)]).unwrap();
    let e = code(&src, &sig).check(0, &shifted, &Launch::linear(8, 64), &[]).unwrap_err();
    assert!(e.contains("workgroup [1, 0, 0]"), "{e}");
}

/// A random index expression over the workgroup id, the local id and a loop counter, as WGSL and as
/// the oracle evaluates it.
#[derive(Clone, Debug)]
enum Ix {
    WidX,
    WidY,
    Lx,
    Ly,
    Counter,
    Lit(u32),
    Add(Box<Ix>, Box<Ix>),
    Mul(Box<Ix>, u32),
    Div(Box<Ix>, u32),
    Rem(Box<Ix>, u32),
}

impl Ix {
    fn wgsl(&self) -> String {
        match self {
            Ix::WidX => "wid.x".into(),
            Ix::WidY => "wid.y".into(),
            Ix::Lx => "l.x".into(),
            Ix::Ly => "l.y".into(),
            Ix::Counter => "c".into(),
            Ix::Lit(v) => format!("{v}u"),
            Ix::Add(a, b) => format!("({} + {})", a.wgsl(), b.wgsl()),
            Ix::Mul(a, k) => format!("({} * {k}u)", a.wgsl()),
            Ix::Div(a, k) => format!("({} / {k}u)", a.wgsl()),
            Ix::Rem(a, k) => format!("({} % {k}u)", a.wgsl()),
        }
    }
    fn eval(&self, wid: [u32; 2], l: [u32; 2], c: u32) -> u32 {
        match self {
            Ix::WidX => wid[0],
            Ix::WidY => wid[1],
            Ix::Lx => l[0],
            Ix::Ly => l[1],
            Ix::Counter => c,
            Ix::Lit(v) => *v,
            Ix::Add(a, b) => a.eval(wid, l, c).wrapping_add(b.eval(wid, l, c)),
            Ix::Mul(a, k) => a.eval(wid, l, c).wrapping_mul(*k),
            Ix::Div(a, k) => a.eval(wid, l, c) / k,
            Ix::Rem(a, k) => a.eval(wid, l, c) % k,
        }
    }
    fn uses_counter(&self) -> bool {
        match self {
            Ix::Counter => true,
            Ix::Add(a, b) => a.uses_counter() || b.uses_counter(),
            Ix::Mul(a, _) | Ix::Div(a, _) | Ix::Rem(a, _) => a.uses_counter(),
            _ => false,
        }
    }
}

/// The core's seeded generator, with the draws the random kernels need.
struct Rng(ostinato::rng::XorShift64);

impl Rng {
    fn next(&mut self, n: u32) -> u32 {
        self.0.below(u64::from(n)) as u32
    }
    fn ix(&mut self, depth: u32) -> Ix {
        let leaf = [Ix::WidX, Ix::WidY, Ix::Lx, Ix::Ly, Ix::Counter];
        if depth == 0 || self.next(3) == 0 {
            return match self.next(6) {
                5 => Ix::Lit(self.next(9)),
                i => leaf[i as usize].clone(),
            };
        }
        let a = Box::new(self.ix(depth - 1));
        match self.next(6) {
            0 | 1 => Ix::Add(a, Box::new(self.ix(depth - 1))),
            2 | 3 => Ix::Mul(a, 1 + self.next(40)),
            4 => Ix::Div(a, 1 + self.next(8)),
            _ => Ix::Rem(a, 1 + self.next(64)),
        }
    }
}

/// Every byte offset workgroup `wid` touches (words of 4 bytes).
/// (The counter runs from `l.x` by the workgroup's width, or, in a grid-stride loop over a grid
/// `stride_grid` wide, from the global id by the grid's width.)
fn touched(ix: &Ix, wid: [u32; 2], block: [u32; 2], counter_end: u32, stride_grid: Option<u32>) -> Vec<u64> {
    let mut out = Vec::new();
    for ly in 0..block[1] {
        for lx in 0..block[0] {
            let (first, step) = match stride_grid {
                Some(g) => (lx + wid[0] * block[0], g * block[0]),
                None => (lx, block[0]),
            };
            let counters: Vec<u32> = if ix.uses_counter() { (first..counter_end).step_by(step as usize).collect() } else { vec![0] };
            for c in counters {
                out.push(4 * u64::from(ix.eval(wid, [lx, ly], c)));
            }
        }
    }
    out
}

/// Random kernels and maps checked, each verdict against brute force: (maps verified and held,
/// wrong maps refused, maps verified that a workgroup leaves). 600 kernels from a fixed seed, or
/// `VK_TILE_PROPS_KERNELS` from `VK_TILE_PROPS_SEED` for a longer campaign (`VK_TILE_PROPS_SEED=7
/// VK_TILE_PROPS_KERNELS=100000 cargo test --release -p ostinato-vulkan --lib brute_force -- --nocapture`).
fn random_kernels_against_brute_force() -> (usize, usize, usize) {
    let sig = KernelSig::new("k").buffer("x", Access::Write);
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = var("VK_TILE_PROPS_SEED").unwrap_or(0x9e37_79b9_7f4a_7c15);
    let kernels = var("VK_TILE_PROPS_KERNELS").map_or(600, |n| n.clamp(1, 10_000_000));
    let mut rng = Rng(ostinato::rng::XorShift64::seeded(seed));
    let (mut verified, mut refused_wrong, mut broken) = (0, 0, 0);
    for _ in 0..kernels {
        let ix = rng.ix(3);
        let block = [[4, 1], [8, 2], [16, 1], [4, 4]][rng.next(4) as usize];
        let grid = [1 + rng.next(5), 1 + rng.next(3)];
        let counter_end = 8 + rng.next(40);
        // A third of the loops stride over the grid (one pass where the grid covers `counter_end`).
        let stride_grid = (rng.next(3) == 0).then_some(grid[0]);
        let (first, step) = if stride_grid.is_some() {
            (format!("l.x + wid.x * {}u", block[0]), format!("nw.x * {}u", block[0]))
        } else {
            ("l.x".into(), format!("{}u", block[0]))
        };
        let src = format!(
            "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size({}, {})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {{
    for (var c = {first}; c < {counter_end}u; c = c + {step}) {{ x[{}] = 1u; }}
}}",
            block[0],
            block[1],
            ix.wgsl()
        );
        // Workgroup 0's footprint and how it moves: the map a user would declare, or one nudged off it.
        let foot = |w: [u32; 2]| {
            let t = touched(&ix, w, block, counter_end, stride_grid);
            if t.is_empty() {
                return (0, 4);
            }
            (*t.iter().min().unwrap(), *t.iter().max().unwrap() + 4)
        };
        let (lo0, hi0) = foot([0, 0]);
        let sx = if grid[0] > 1 { foot([1, 0]).0 as i64 - lo0 as i64 } else { 0 };
        let sy = if grid[1] > 1 { foot([0, 1]).0 as i64 - lo0 as i64 } else { 0 };
        if sx < 0 || sy < 0 {
            continue;
        }
        // A stride a user might get wrong: none, or double the footprint's.
        let (sx, sy) = match rng.next(6) {
            0 => (0, sy),
            1 => (2 * sx, sy),
            _ => (sx, sy),
        };
        let nudge = [0i64, 0, 0, -4, 4][rng.next(5) as usize];
        let len = (hi0 - lo0) as i64 + [0i64, 0, 0, -4][rng.next(4) as usize];
        let base = lo0 as i64 + nudge;
        if len <= 0 || base < 0 {
            continue;
        }
        let map = TileMap::new(vec![TileRange::span(base as u64, [sx as u64, sy as u64, 0], len as u64)]).unwrap();
        let launch = Launch::new([grid[0], grid[1], 1], [block[0], block[1], 1]);
        let verdict = code(&src, &sig).check(0, &map, &launch, &[]);
        let inside =
            (0..grid[1]).all(|y| (0..grid[0]).all(|x| touched(&ix, [x, y], block, counter_end, stride_grid).iter().all(|&o| map.covers([x, y, 0], o, o + 4))));
        match (verdict, inside) {
            (Ok(()), true) => verified += 1,
            (Ok(()), false) => {
                broken += 1;
                if !IGNORE_STRIDES.with(|c| c.get()) {
                    eprintln!("VERIFIED BUT LEFT: grid {grid:?} block {block:?} map {map:?}\n{src}");
                }
            }
            (Err(_), false) => refused_wrong += 1,
            (Err(_), true) => {}
        }
    }
    (verified, refused_wrong, broken)
}

#[test]
fn a_verified_map_holds_for_every_access_of_random_kernels_brute_force() {
    let (verified, refused_wrong, broken) = random_kernels_against_brute_force();
    eprintln!("random kernels: {verified} maps verified and held, {refused_wrong} wrong maps refused");
    assert_eq!(broken, 0, "a map verified that a workgroup leaves");
    // Not vacuous: many maps verified, many wrong ones refused.
    assert!(verified >= 100 && refused_wrong >= 50, "{verified} verified, {refused_wrong} wrong maps refused");
}

#[test]
fn the_brute_force_property_catches_a_check_that_ignores_the_maps_strides() {
    IGNORE_STRIDES.with(|c| c.set(true));
    let (_, _, broken) = random_kernels_against_brute_force();
    IGNORE_STRIDES.with(|c| c.set(false));
    assert!(broken > 0, "the mutation went unseen");
}

#[test]
fn code_nested_past_the_limit_is_unverified_not_a_crash() {
    // An index of 3,000 terms: naga reads it on a large stack; the check, on a small one, stops at its
    // depth limit rather than at the end of the stack.
    let sum = vec!["l.x"; 3000].join(" + ");
    let src = format!(
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {{ x[wid.x * 64u + ({sum}) % 64u] = 1u; }}"
    );
    let sig = KernelSig::new("k").buffer("x", Access::Write);
    let on_stack = |size: usize, f: Box<dyn FnOnce() -> Box<dyn std::any::Any + Send> + Send>| {
        std::thread::Builder::new().stack_size(size).spawn(f).unwrap().join().expect("no stack overflow")
    };
    let c = on_stack(256 << 20, Box::new(move || Box::new(code(&src, &sig)))).downcast::<TileCode>().unwrap();
    let e = on_stack(1 << 20, Box::new(move || Box::new(c.check(0, &TileMap::linear(256, 256).unwrap(), &Launch::linear(4, 64), &[]))))
        .downcast::<Result<(), String>>()
        .unwrap()
        .unwrap_err();
    assert!(e.contains("nested more than 200 deep"), "{e}");
}

#[test]
fn a_grid_stride_loop_of_one_pass_keeps_each_workgroup_in_its_own_tile() {
    let src = "struct Params { n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
var<immediate> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    for (var i = wid.x * 64u + l.x; i < p.n; i = i + nw.x * 64u) {
        x[i] = x[i] + 1.0;
    }
}";
    let sig = KernelSig::new("k").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    let c = code(src, &sig);
    let map = TileMap::linear(256, 256).unwrap();
    // As many elements as invocations (or fewer): one pass, each workgroup its own 64.
    c.check(0, &map, &Launch::linear(8, 64), &scalars(&[512])).unwrap();
    c.check(0, &map, &Launch::linear(8, 64), &scalars(&[300])).unwrap();
    // Twice as many: a second pass reaches the next grid's worth, outside the map: not verified.
    let e = c.check(0, &map, &Launch::linear(8, 64), &scalars(&[1024])).unwrap_err();
    assert!(e.contains("line 7") && e.contains("variable"), "{e}");
}
