//! Host kernels of the decode-shaped workload (f32, plain loops). Their CUDA twins live in
//! `kernels/decode.cu` with the same signatures; results agree within the benchmark's stated f32
//! tolerance (summation order differs).

use ostinato::{Access, KernelSig, ScalarType};

use crate::kernel::HostKernel;

/// `rmsnorm(out: write f32[n], x: read f32[n], w: read f32[n], n: u32, eps: f32)`.
pub fn rmsnorm() -> HostKernel {
    let sig = KernelSig::new("rmsnorm")
        .buffer("out", Access::Write)
        .buffer("x", Access::Read)
        .buffer("w", Access::Read)
        .scalar("n", ScalarType::U32)
        .scalar("eps", ScalarType::F32);
    HostKernel::new(sig, |cx| {
        let (n, eps) = (cx.u32(3)? as usize, cx.f32(4)?);
        let (out, x, w) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?);
        let (out, x, w) = (out.words(n, true)?, x.words(n, false)?, w.words(n, false)?);
        let ss: f32 = (0..n).map(|i| x.f32(i) * x.f32(i)).sum();
        let scale = 1.0 / (ss / n as f32 + eps).sqrt();
        for i in 0..n {
            out.set_f32(i, x.f32(i) * scale * w.f32(i));
        }
        Ok(())
    })
}

/// `gemv(y: write f32[m], w: read f32[m*k], x: read f32[k], m: u32, k: u32)`: y = W x, W row-major.
pub fn gemv() -> HostKernel {
    let sig = KernelSig::new("gemv")
        .buffer("y", Access::Write)
        .buffer("w", Access::Read)
        .buffer("x", Access::Read)
        .scalar("m", ScalarType::U32)
        .scalar("k", ScalarType::U32);
    HostKernel::new(sig, |cx| {
        let (m, k) = (cx.u32(3)? as usize, cx.u32(4)? as usize);
        let (y, w, x) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?);
        let (y, w, x) = (y.words(m, true)?, w.words(m * k, false)?, x.words(k, false)?);
        let xs: Vec<f32> = (0..k).map(|j| x.f32(j)).collect();
        for i in 0..m {
            let mut acc = 0.0f32;
            for (j, xv) in xs.iter().enumerate() {
                acc += w.f32(i * k + j) * xv;
            }
            y.set_f32(i, acc);
        }
        Ok(())
    })
}

/// `rope(qk: read_write f32[heads*head_dim], pos: u32, heads: u32, head_dim: u32)`: rotates each
/// (2i, 2i+1) pair of each head by pos · 10000^(-2i/head_dim).
pub fn rope() -> HostKernel {
    let sig = KernelSig::new("rope")
        .buffer("qk", Access::ReadWrite)
        .scalar("pos", ScalarType::U32)
        .scalar("heads", ScalarType::U32)
        .scalar("head_dim", ScalarType::U32);
    HostKernel::new(sig, |cx| {
        let (qk, pos, heads, hd) = (cx.buffer(0)?, cx.u32(1)?, cx.u32(2)? as usize, cx.u32(3)? as usize);
        for h in 0..heads {
            for i in 0..hd / 2 {
                let theta = pos as f32 * 10000f32.powf(-2.0 * i as f32 / hd as f32);
                let (s, c) = theta.sin_cos();
                let (a, b) = (h * hd + 2 * i, h * hd + 2 * i + 1);
                let (x0, x1) = (qk.load_f32(a)?, qk.load_f32(b)?);
                qk.store_f32(a, x0 * c - x1 * s)?;
                qk.store_f32(b, x0 * s + x1 * c)?;
            }
        }
        Ok(())
    })
}

/// `kv_store(kcache: read_write f32[max_seq*kv], vcache: read_write f32[max_seq*kv], k: read f32[kv],
/// v: read f32[kv], pos: u32, kv: u32)`: writes row `pos` of both caches.
pub fn kv_store() -> HostKernel {
    let sig = KernelSig::new("kv_store")
        .buffer("kcache", Access::ReadWrite)
        .buffer("vcache", Access::ReadWrite)
        .buffer("k", Access::Read)
        .buffer("v", Access::Read)
        .scalar("pos", ScalarType::U32)
        .scalar("kv", ScalarType::U32);
    HostKernel::new(sig, |cx| {
        let (kc, vc, k, v, pos, kv) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?, cx.buffer(3)?, cx.u32(4)? as usize, cx.u32(5)? as usize);
        for i in 0..kv {
            kc.store_f32(pos * kv + i, k.load_f32(i)?)?;
            vc.store_f32(pos * kv + i, v.load_f32(i)?)?;
        }
        Ok(())
    })
}

/// `attention(out: write f32[heads*hd], q: read f32[heads*hd], kcache: read, vcache: read, pos: u32,
/// heads: u32, kv_heads: u32, head_dim: u32)`: causal attention of one token over cache rows 0..=pos,
/// grouped-query (head h reads kv head h / (heads / kv_heads)).
pub fn attention() -> HostKernel {
    let sig = KernelSig::new("attention")
        .buffer("out", Access::Write)
        .buffer("q", Access::Read)
        .buffer("kcache", Access::Read)
        .buffer("vcache", Access::Read)
        .scalar("pos", ScalarType::U32)
        .scalar("heads", ScalarType::U32)
        .scalar("kv_heads", ScalarType::U32)
        .scalar("head_dim", ScalarType::U32);
    HostKernel::new(sig, |cx| {
        let (out, q, kc, vc) = (cx.buffer(0)?, cx.buffer(1)?, cx.buffer(2)?, cx.buffer(3)?);
        let (pos, heads, kvh, hd) = (cx.u32(4)? as usize, cx.u32(5)? as usize, cx.u32(6)? as usize, cx.u32(7)? as usize);
        if kvh == 0 || heads % kvh != 0 {
            return Err(format!("attention: heads {heads} is not a multiple of kv_heads {kvh}"));
        }
        if hd == 0 {
            return Err("attention: head_dim is 0".into());
        }
        let group = heads / kvh;
        let scale = 1.0 / (hd as f32).sqrt();
        // Every size is checked against the declared extents before anything is allocated: `rows`
        // (counted without overflow) bounds `pos`, and `heads * hd` words of `q` bound `hd`.
        let too_big = || format!("attention: pos {pos}, kv_heads {kvh} and head_dim {hd} address more than the cache holds");
        let rows = pos.checked_add(1).and_then(|p| p.checked_mul(kvh)).and_then(|r| r.checked_mul(hd)).ok_or_else(too_big)?;
        let qn = heads.checked_mul(hd).ok_or_else(too_big)?;
        let (out, q, kc, vc) = (out.words(qn, true)?, q.words(qn, false)?, kc.words(rows, false)?, vc.words(rows, false)?);
        // Online softmax over the rows: a running maximum, sum and weighted value per head, no scratch
        // proportional to the position.
        let mut acc = Vec::new();
        acc.try_reserve_exact(hd).map_err(|_| format!("attention: cannot allocate {hd} floats of accumulator"))?;
        acc.resize(hd, 0.0f32);
        for h in 0..heads {
            let kvo = (h / group) * hd;
            let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
            acc.iter_mut().for_each(|a| *a = 0.0);
            for t in 0..=pos {
                let mut d = 0.0f32;
                for i in 0..hd {
                    d += q.f32(h * hd + i) * kc.f32(t * kvh * hd + kvo + i);
                }
                let score = d * scale;
                let new_max = max.max(score);
                let (rescale, weight) = ((max - new_max).exp(), (score - new_max).exp());
                sum = sum * rescale + weight;
                for (i, a) in acc.iter_mut().enumerate() {
                    *a = *a * rescale + weight * vc.f32(t * kvh * hd + kvo + i);
                }
                max = new_max;
            }
            for (i, a) in acc.iter().enumerate() {
                out.set_f32(h * hd + i, a / sum);
            }
        }
        Ok(())
    })
}

/// `add(x: read_write f32[n], y: read f32[n], n: u32)`: x += y (the residual stream).
pub fn add() -> HostKernel {
    let sig = KernelSig::new("add").buffer("x", Access::ReadWrite).buffer("y", Access::Read).scalar("n", ScalarType::U32);
    HostKernel::new(sig, |cx| {
        let n = cx.u32(2)? as usize;
        let (x, y) = (cx.buffer(0)?, cx.buffer(1)?);
        let (x, y) = (x.words(n, true)?, y.words(n, false)?);
        for i in 0..n {
            x.set_f32(i, x.f32(i) + y.f32(i));
        }
        Ok(())
    })
}

/// `silu_mul(out: write f32[n], gate_up: read f32[2n], n: u32)`: out = silu(gate) * up.
pub fn silu_mul() -> HostKernel {
    let sig = KernelSig::new("silu_mul").buffer("out", Access::Write).buffer("gate_up", Access::Read).scalar("n", ScalarType::U32);
    HostKernel::new(sig, |cx| {
        let n = cx.u32(2)? as usize;
        let (out, gu) = (cx.buffer(0)?, cx.buffer(1)?);
        let (out, gu) = (out.words(n, true)?, gu.words(2 * n, false)?);
        for i in 0..n {
            let g = gu.f32(i);
            out.set_f32(i, g / (1.0 + (-g).exp()) * gu.f32(n + i));
        }
        Ok(())
    })
}

pub fn all() -> Vec<HostKernel> {
    vec![rmsnorm(), gemv(), rope(), kv_store(), attention(), add(), silu_mul()]
}
