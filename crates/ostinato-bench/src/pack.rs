//! The benchmark's kernel pack: the kernels of the kernel-family rows (geometry, reductions, memory
//! latency, packed dots, quantized GEMV) and of the tile rows (row kernels and tile kernels whose blocks
//! each touch a declared tile), bound through kernel references the way a user's kernels
//! are — no backend names them. Each kernel has three implementations with one signature:
//! - CUDA C in `kernels/*.cu` (a file per family, each kernel compiled by itself, or with the kernels it
//!   is meant to fuse with: kernels bound from one code can run as bodies of one fused kernel), written
//!   with `ostinato.cuh`'s `OST_ENTRY`/`OST_EXIT` so that the CUDA backend builds its trigger variants
//!   and certifies PDL from the PTX; a kernel the fused-body rules allow is declared `fusable`;
//! - WGSL in `kernels/*.wgsl`, a template per kernel that the row fills in (its workgroup shape, its
//!   element type, its count of loads), for the Vulkan backend and the raw Vulkan baseline alike;
//! - a host twin (`crate::families`), the oracle, computing what the kernel computes in the order the
//!   kernel computes it where floats make the order matter; run block by block where the rows declare
//!   tile maps, so that the host checks every access against its block's tile.

use std::sync::Arc;

use ostinato::{KernelRef, KernelSig, RefOption};
use ostinato_host::kernel::HostKernel;

/// One compile unit of the pack's CUDA C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaUnit {
    Geometry,
    Reduce,
    Memory,
    Dot,
    Gemv,
    Tiles,
}

impl CudaUnit {
    pub const ALL: [CudaUnit; 6] = [CudaUnit::Geometry, CudaUnit::Reduce, CudaUnit::Memory, CudaUnit::Dot, CudaUnit::Gemv, CudaUnit::Tiles];
    /// The name the unit goes by (messages, caches, manifests).
    pub fn name(self) -> &'static str {
        match self {
            CudaUnit::Geometry => "bench-geometry.cu",
            CudaUnit::Reduce => "bench-reduce.cu",
            CudaUnit::Memory => "bench-memory.cu",
            CudaUnit::Dot => "bench-dot.cu",
            CudaUnit::Gemv => "bench-gemv.cu",
            CudaUnit::Tiles => "bench-tiles.cu",
        }
    }
    /// The unit's CUDA C.
    pub fn source(self) -> &'static str {
        match self {
            CudaUnit::Geometry => include_str!("../kernels/geometry.cu"),
            CudaUnit::Reduce => include_str!("../kernels/reduce.cu"),
            CudaUnit::Memory => include_str!("../kernels/memory.cu"),
            CudaUnit::Dot => include_str!("../kernels/dot.cu"),
            CudaUnit::Gemv => include_str!("../kernels/gemv.cu"),
            CudaUnit::Tiles => include_str!("../kernels/tiles.cu"),
        }
    }
    /// The code of kernel `entry`: the unit with `#define OST_BENCH_<entry>` in front, so that it
    /// compiles that kernel alone (and a fused kernel of its nodes one body, not the family's);
    /// `OST_BENCH_ALL` compiles every kernel of the unit. `entry` may also name a group of the unit's
    /// kernels that one guard defines together (`tiles_rms`: the three kernels of a residual layer).
    pub fn code_of(self, entry: &str) -> String {
        format!("#define OST_BENCH_{entry}\n{}", self.source())
    }
}

/// What a Vulkan device's shaders may use beyond the base language, where a pack kernel has a
/// version that uses it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShaderFeatures {
    /// The packed integer dot product (`dot4I8Packed`).
    pub packed_dot: bool,
    /// f32 atomic adds on storage buffers (`atomicAdd` on an `atomic<f32>`).
    pub float_atomic_add: bool,
}

impl ShaderFeatures {
    /// What `ctx`'s device has, enabled.
    pub fn of(ctx: &ostinato_vulkan::Context) -> ShaderFeatures {
        ShaderFeatures { packed_dot: ctx.integer_dot_product(), float_atomic_add: ctx.float32_atomic_add() }
    }
    /// Every combination (what a test runs each version of a pack's WGSL under).
    pub const ALL: [ShaderFeatures; 4] = [
        ShaderFeatures { packed_dot: false, float_atomic_add: false },
        ShaderFeatures { packed_dot: true, float_atomic_add: false },
        ShaderFeatures { packed_dot: false, float_atomic_add: true },
        ShaderFeatures { packed_dot: true, float_atomic_add: true },
    ];
}

/// A kernel's WGSL, filled in for its row: as written for any device, and (where the kernel has one)
/// a version for devices with a feature: `dot4I8Packed` where the device has the packed integer dot
/// product, `atomicAdd` on an `atomic<f32>` where it adds f32 atomically (the version without it is a
/// compare-exchange loop on the bits). The constructors give a kernel at most one such version (no
/// pack kernel uses both features); [`Wgsl::for_device`] would pick the packed-dot one first.
#[derive(Clone, Debug)]
pub struct Wgsl {
    pub plain: Arc<str>,
    pub packed_dot: Option<Arc<str>>,
    pub float_atomic_add: Option<Arc<str>>,
}

impl Wgsl {
    /// WGSL with no device-dependent part.
    pub fn one(source: String) -> Wgsl {
        Wgsl { plain: source.into(), packed_dot: None, float_atomic_add: None }
    }
    /// WGSL whose `DOT4I8(` calls become `dot4I8Packed(` where the device has the packed integer dot
    /// product, and the pack's `dot4_i8(` (four byte products, summed) where not.
    pub fn with_packed_dot(template: &str) -> Wgsl {
        let helper = include_str!("../kernels/dot4.wgsl");
        Wgsl {
            plain: format!("{helper}\n{}", template.replace("DOT4I8(", "dot4_i8(")).into(),
            packed_dot: Some(template.replace("DOT4I8(", "dot4I8Packed(").into()),
            float_atomic_add: None,
        }
    }
    /// `plain` for any device, `native` (f32 atomic adds) for a device that has them.
    pub fn with_float_atomic_add(plain: String, native: String) -> Wgsl {
        Wgsl { plain: plain.into(), packed_dot: None, float_atomic_add: Some(native.into()) }
    }
    /// The version for a device with `features`.
    pub fn for_device(&self, features: ShaderFeatures) -> &str {
        match (&self.packed_dot, &self.float_atomic_add) {
            (Some(p), _) if features.packed_dot => p,
            (_, Some(f)) if features.float_atomic_add => f,
            _ => &self.plain,
        }
    }
}

/// A kernel of the pack: its signature and its three implementations.
#[derive(Clone)]
pub struct PackKernel {
    pub sig: KernelSig,
    /// CUDA: the kernel's code ([`CudaUnit::code_of`]) and entry.
    pub cuda: KernelRef,
    pub wgsl: Wgsl,
    pub host: HostKernel,
}

impl std::fmt::Debug for PackKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackKernel({} in {})", self.sig.name, self.cuda.source)
    }
}

impl PackKernel {
    /// `sig`'s implementations: entry `sig.name` of `unit` (declared `fusable` where `fusable`), `wgsl`,
    /// and the host twin `host`, which runs the whole launch in one call.
    pub fn new(
        sig: KernelSig,
        unit: CudaUnit,
        fusable: bool,
        wgsl: Wgsl,
        host: impl Fn(&ostinato_host::kernel::KernelCtx) -> Result<(), String> + Send + Sync + 'static,
    ) -> PackKernel {
        let name = sig.name.clone();
        PackKernel::in_code(sig.clone(), unit, &name, fusable, wgsl, HostKernel::new(sig, host))
    }

    /// `sig`'s implementations where its CUDA code is `code` of `unit` ([`CudaUnit::code_of`]: the
    /// kernel alone, or a group of kernels defined together, which then share one module and may fuse
    /// with each other), entry `sig.name`; `host` is its host twin as made ([`HostKernel::new`], or
    /// [`HostKernel::per_block`] for a kernel whose nodes declare tile maps).
    pub fn in_code(sig: KernelSig, unit: CudaUnit, code: &str, fusable: bool, wgsl: Wgsl, host: HostKernel) -> PackKernel {
        let mut cuda = KernelRef::code(&format!("bench-{code}.cu"), unit.code_of(code)).with_entry(&sig.name);
        if fusable {
            cuda = cuda.with_option("fusable", RefOption::Bool(true));
        }
        PackKernel { host, sig, cuda, wgsl }
    }
    /// The WGSL for a device with `features`.
    pub fn wgsl_for(&self, features: ShaderFeatures) -> &str {
        self.wgsl.for_device(features)
    }
    /// The Vulkan reference: the WGSL in memory for a device with `features`, entry `main`.
    pub fn vulkan_ref(&self, features: ShaderFeatures) -> KernelRef {
        KernelRef::code(&format!("{}.wgsl", self.sig.name), self.wgsl_for(features)).with_entry("main")
    }
}
