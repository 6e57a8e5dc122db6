//! The step's tile maps, as the planner reads them: which block-level relations the frontier hazards
//! of a layer's QKV, attention and output projection come out as (`plan --explain` prints the same
//! lines), and that the host checks every access of the per-block twins against its block's tile (a
//! map shifted by one row fails the replay).

use ostinato::tiles::{DenseReason, TileRelation};
use ostinato::{Arg, Backend, Exec, Graph, Launch, NodeId, Plan, Scalar, TileMap, TileRange};
use ostinato_host::HostBackend;
use ostinato_llama::{geometry as geo, host, record, LlamaConfig, StepOptions};

/// Node `i` of layer `l`'s five (QKV, attention, O, gate/up, down), after the embedding.
fn node(l: u32, i: u32) -> NodeId {
    NodeId(1 + 5 * l + i)
}

/// Every frontier predecessor of `v` and how its blocks relate, as `plan --explain` words it.
fn frontier(plan: &Plan, v: NodeId) -> Vec<(NodeId, TileRelation)> {
    plan.hazard_preds(v).iter().map(|&u| (NodeId(u), plan.tile_relation(NodeId(u), v))).collect()
}

fn show(plan: &Plan, v: NodeId) -> String {
    let g = plan.graph();
    let mut s = format!("{} waits for:\n", g.describe_node(v));
    for (u, r) in frontier(plan, v) {
        s += &format!("  {}: {}\n", g.describe_node(u), r.describe());
    }
    s
}

fn sparse(r: &TileRelation) -> Option<(usize, usize)> {
    match r {
        TileRelation::Sparse(d) => Some((d.pairs(), d.max_per_consumer())),
        _ => None,
    }
}

#[test]
fn a_layer_hands_off_per_kv_head_from_qkv_to_attention_to_o_but_o_waits_for_the_residual() {
    for (c, splits) in [(LlamaConfig::llama_3_2_1b(1024), 16), (LlamaConfig::llama_3_2_3b(1024), 16)] {
        let step = record(&c, StepOptions { attn_splits: splits, ..Default::default() }).unwrap();
        let plan = Plan::compile(&step.graph).unwrap();
        let (qkv, attn, o) = (node(1, 0), node(1, 1), node(1, 2));
        for v in [qkv, attn, o] {
            println!("{}", show(&plan, v));
        }
        let qkv_blocks_per_head = geo::qkv_grid(&c)[0] as usize;
        let group = geo::group(&c) as usize;
        // Attention's only frontier predecessor is its layer's QKV, and block (s, h) waits for the QKV
        // blocks of its query heads and of KV head h's K and V rows: 8 per head read.
        let f = frontier(&plan, attn);
        assert_eq!(f.iter().map(|(u, _)| *u).collect::<Vec<_>>(), vec![qkv], "{}", show(&plan, attn));
        let per_block = qkv_blocks_per_head * (group + 2);
        assert_eq!(sparse(&f[0].1), Some((splits as usize * c.kv_heads as usize * per_block, per_block)), "{}", show(&plan, attn));
        // O's partials come from its head's attention splits only (sparse) ...
        let f = frontier(&plan, o);
        let from_attn = f.iter().find(|(u, _)| *u == attn).map(|(_, r)| r).unwrap();
        let o_blocks = geo::o_grid(&c)[0] as usize * c.kv_heads as usize;
        assert_eq!(sparse(from_attn), Some((o_blocks * splits as usize, splits as usize)), "{}", show(&plan, o));
        // ... but its residual add writes x, which every QKV block of the layer read (broadcast: no map)
        // and the previous layer's down projection (persistent, no map) wrote: whole-node orderings.
        for (u, why) in [(qkv, "x"), (node(0, 4), "x")] {
            let r = f.iter().find(|(p, _)| *p == u).map(|(_, r)| r).unwrap_or_else(|| panic!("{}", show(&plan, o)));
            assert!(matches!(r, TileRelation::Dense(DenseReason::NoMap { param, .. }) if param == why), "{}", show(&plan, o));
        }
        // QKV rewrites qkv rows block by block over the previous layer's QKV, after that layer's
        // attention blocks that read them (sparse), and reads x from the previous down (whole node).
        let f = frontier(&plan, qkv);
        assert!(f.iter().any(|(u, r)| *u == node(0, 0) && r.is_block_local()), "{}", show(&plan, qkv));
        assert!(f.iter().any(|(u, r)| *u == node(0, 1) && sparse(r).is_some()), "{}", show(&plan, qkv));
        assert!(f.iter().any(|(u, r)| *u == node(0, 4) && matches!(r, TileRelation::Dense(_))), "{}", show(&plan, qkv));
        // The explanation prints the same relations under the kept edges.
        assert!(plan.explain().contains("tiles: sparse"), "{}", plan.explain());
    }
}

#[test]
fn a_twin_that_leaves_its_tile_fails_the_replay() {
    let c = LlamaConfig::shrunk(16);
    let (rows, hidden) = (c.heads + 2 * c.kv_heads, c.hidden as u64);
    let build = |shift: u64| {
        let mut g = Graph::new();
        let qkv = g.add_buffer("qkv", 4 * (rows * c.head_dim) as u64 + 64).unwrap();
        let x = g.add_buffer("x", 4 * hidden).unwrap();
        let ln = g.add_buffer("ln", 2 * hidden).unwrap();
        let w = g.add_buffer("wqkv", 2 * (rows * c.head_dim) as u64 * hidden).unwrap();
        let f = g.add_buffer("rope_freq", 2 * c.head_dim as u64).unwrap();
        let k = g.add_kernel(host::qkv_sig()).unwrap();
        let mut maps: Vec<(&str, TileMap)> = geo::qkv_maps(&c);
        // The qkv map moved by `shift` bytes: block b's rows are then a neighbour's.
        let r = maps[0].1.ranges()[0];
        maps[0].1 = TileMap::new(vec![TileRange { base: r.base + shift, ..r }]).unwrap();
        let u = |n: u32| Arg::Scalar(Scalar::u32(n));
        let args = [
            Arg::Whole(qkv),
            Arg::Whole(x),
            Arg::Whole(ln),
            Arg::Whole(w),
            Arg::Whole(f),
            u(3),
            u(c.hidden),
            u(c.heads),
            u(c.kv_heads),
            u(c.head_dim),
            Arg::Scalar(Scalar::f32(1e-5)),
        ];
        let launch = Launch::new(geo::qkv_grid(&c), [32 * geo::qkv_warps(&c), 1, 1]);
        g.add_launch_tiled(k, launch, &args, &maps, &[]).unwrap();
        let plan = Plan::compile(&g).unwrap();
        HostBackend::serial().instantiate(&plan, vec![host::qkv()], ostinato::allocate_all(&plan)).unwrap()
    };
    let mut exact = build(0);
    exact.replay().unwrap();
    exact.wait().unwrap();
    let mut shifted = build(16);
    let e = shifted.replay().and_then(|_| shifted.wait()).unwrap_err().to_string();
    assert!(e.contains("tile") && e.contains("qkv"), "{e}");
}
