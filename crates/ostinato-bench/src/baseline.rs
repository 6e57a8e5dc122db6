//! The hand-written CUDA baselines: eager launches, the user's stream capture and the expert's capture
//! with PDL, on the row's memory and stream, submitted through the benchmark's own driver layer
//! (`cuda_raw.rs`).

use std::sync::Arc;
use std::time::Instant;

use crate::arms::{baseline_kernels, bind_cuda, err, median_gpu_us, single_call_us, slot_value, Arm, ArmKind, OstinatoCuda, RawSample, RowMemory, CALL_BURST};
use crate::cuda_raw::{allow_dynamic_shared, Args, CapturedGraph, Event, Stream};
use crate::workload::Workload;
use ostinato::{Arg, NodeOp, Plan};
use ostinato_cuda::lower::{lower, ArgValue, PdlPolicy};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaKernel, Device, PdlMode};

pub struct Baseline {
    kind: ArmKind,
    kernels: Vec<CudaKernel>,
    /// The row's stream first, then one per further stream of the user schedule.
    streams: Vec<Arc<Stream>>,
    done: Vec<Option<Event>>,
    fork: Event,
    joins: Vec<Event>,
    timer: (Event, Event),
    memory: Arc<RowMemory>,
    launches: Vec<ostinato_cuda::lower::NodeLaunch>,
    args: Vec<Args>,
    /// Captured arms: one graph per distinct slot value (all the sample's replays), else one.
    graphs: Vec<CapturedGraph>,
    written: Vec<bool>,
    /// Samples take the replay-call probes.
    probes: bool,
}

impl Baseline {
    pub fn new(
        device: &Device,
        w: &Workload,
        kernels: Vec<CudaKernel>,
        kind: ArmKind,
        memory: &Arc<RowMemory>,
        init: &[Option<Vec<u8>>],
    ) -> Result<Self, String> {
        let g = &w.graph;
        if g.nodes().iter().any(|n| !matches!(n.op, NodeOp::Kernel { .. })) {
            return Err("baselines submit kernel nodes only".into());
        }
        let plan = Plan::compile(g).map_err(err("plan"))?;
        device.bind_to_thread().map_err(err("context"))?;
        let low = lower(&plan, &vec![true; g.kernels().len()], true, PdlPolicy::new(PdlMode::Off));
        // Past 48 KiB of dynamic shared memory a kernel needs the opt-in, as in any CUDA program.
        let mut shared = vec![0u32; kernels.len()];
        for l in &low.launches {
            if let ostinato_cuda::lower::Callee::Kernel(k) = l.callee {
                shared[k.index()] = shared[k.index()].max(l.dims.shared);
            }
        }
        for (k, &bytes) in kernels.iter().zip(&shared).filter(|(_, &b)| b > 48 * 1024) {
            allow_dynamic_shared(k, bytes).map_err(|e| format!("kernel `{}`: {e}", k.name))?;
        }
        let mut base = vec![0u64; g.buffers().len()];
        // The row's memory holds the roots no node writes; the written ones start each sample anew.
        let written = plan.graph().written_roots();
        for (i, b) in g.buffers().iter().enumerate() {
            if b.root.index() == i {
                let buf = memory.root(i)?;
                if let (Some(bytes), true) = (&init[i], written[i]) {
                    buf.write(0, bytes).map_err(err("init"))?;
                }
                base[i] = buf.ptr();
            }
        }
        let value = |a: &ArgValue| match a {
            ArgValue::Pointer { root, offset } => base[root.index()] + offset,
            ArgValue::Bits(b) => *b,
            ArgValue::Slot(s) => g.slots()[s.index()].initial.bits,
        };
        let args = low.launches.iter().map(|l| Args::new(&l.args.iter().map(value).collect::<Vec<_>>())).collect();
        let mut streams = vec![memory.stream.clone()];
        for _ in 1..w.streams.max(1) {
            streams.push(Arc::new(Stream::new()?));
        }
        let mut done: Vec<Option<Event>> = (0..g.nodes().len()).map(|_| None).collect();
        for u in &w.user {
            for n in &u.waits {
                if done[n.index()].is_none() {
                    done[n.index()] = Some(Event::new(false)?);
                }
            }
        }
        let joins = (0..streams.len()).map(|_| Event::new(false)).collect::<Result<Vec<_>, _>>()?;
        let mut b = Baseline {
            kind,
            kernels,
            streams,
            done,
            fork: Event::new(false)?,
            joins,
            timer: (Event::new(true)?, Event::new(true)?),
            memory: memory.clone(),
            launches: low.launches,
            args,
            graphs: Vec::new(),
            written,
            probes: true,
        };
        if matches!(kind, ArmKind::Captured | ArmKind::CapturedPdl) {
            let values = match &w.slot_schedule {
                Some((_, v)) => v.len(),
                None => 1,
            };
            for r in 0..values {
                b.set_slot(w, r);
                b.streams[0].begin_capture().map_err(err("begin capture"))?;
                let enq = b.enqueue(w, kind == ArmKind::CapturedPdl);
                let graph = b.streams[0].end_capture().map_err(err("end capture"))?;
                enq?;
                b.graphs.push(graph);
            }
        }
        Ok(b)
    }

    fn set_slot(&mut self, w: &Workload, r: usize) {
        if let Some((slot, v)) = slot_value(w, r) {
            for (i, node) in w.graph.nodes().iter().enumerate() {
                if let NodeOp::Kernel { args, .. } = &node.op {
                    for (j, a) in args.iter().enumerate() {
                        if *a == Arg::Slot(slot) {
                            self.args[i].set(j, v.bits);
                        }
                    }
                }
            }
        }
    }

    /// One replay in recording order, as the user schedule says (fork/join over the streams).
    fn enqueue(&mut self, w: &Workload, pdl: bool) -> Result<(), String> {
        let multi = self.streams.len() > 1;
        if multi {
            self.streams[0].record(&self.fork).map_err(err("fork"))?;
            for s in &self.streams[1..] {
                s.wait(&self.fork).map_err(err("fork"))?;
            }
        }
        for (i, u) in w.user.iter().enumerate() {
            let s = &self.streams[u.stream];
            for n in &u.waits {
                if let Some(e) = &self.done[n.index()] {
                    s.wait(e).map_err(err("wait"))?;
                }
            }
            let l = &self.launches[i];
            let k = match l.callee {
                ostinato_cuda::lower::Callee::Kernel(k) => &self.kernels[k.index()],
                _ => return Err("baselines submit kernel nodes only".into()),
            };
            s.launch(k, l.dims, &mut self.args[i], pdl).map_err(|e| format!("launch node {i}: {e}"))?;
            if let Some(e) = &self.done[i] {
                s.record(e).map_err(err("record"))?;
            }
        }
        if multi {
            for (j, s) in self.streams.iter().enumerate().skip(1) {
                s.record(&self.joins[j]).map_err(err("join"))?;
                self.streams[0].wait(&self.joins[j]).map_err(err("join"))?;
            }
        }
        Ok(())
    }
}

impl Baseline {
    /// Each node's GPU time, median over `rounds`: `alone`, launched by itself on an idle GPU (in
    /// recording order, so a node's weights were last read a whole step earlier and L2 does not serve
    /// them) less `floor`, the same measurement of an empty kernel (the events' and the launch's own
    /// cost, returned too); and `chained`, from the previous node's end to its own in the eager chain
    /// (one stream, an event between nodes, no waits): the gaps and ramps a chain pays, without overlap.
    pub fn time_nodes(&mut self, w: &Workload, rounds: usize, empty: &CudaKernel) -> Result<(Vec<f64>, Vec<f64>, f64), String> {
        self.set_slot(w, 0);
        let n = self.launches.len();
        let events: Vec<Event> = (0..=n).map(|_| Event::new(true)).collect::<Result<_, _>>()?;
        let (mut alone, mut chained, mut floor) = (vec![Vec::new(); n], vec![Vec::new(); n], Vec::new());
        let s = self.streams[0].clone();
        let mut empty_args = Args::new(&[0, 0, 0]);
        let one = ostinato_cuda::Dims { grid: [1, 1, 1], block: [32, 1, 1], shared: 0 };
        for _ in 0..rounds.max(1) {
            for _ in 0..8 {
                s.record(&events[0]).map_err(err("timer"))?;
                s.launch(empty, one, &mut empty_args, false).map_err(err("empty kernel"))?;
                s.record(&events[1]).map_err(err("timer"))?;
                events[1].synchronize().map_err(err("sync"))?;
                floor.push(events[1].elapsed_ms_since(&events[0]).map_err(err("timer"))? * 1e3);
            }
            for (i, times) in alone.iter_mut().enumerate() {
                s.record(&events[0]).map_err(err("timer"))?;
                self.launch_node(i, &s)?;
                s.record(&events[1]).map_err(err("timer"))?;
                events[1].synchronize().map_err(err("sync"))?;
                times.push(events[1].elapsed_ms_since(&events[0]).map_err(err("timer"))? * 1e3);
            }
            s.record(&events[0]).map_err(err("timer"))?;
            for i in 0..n {
                self.launch_node(i, &s)?;
                s.record(&events[i + 1]).map_err(err("timer"))?;
            }
            events[n].synchronize().map_err(err("sync"))?;
            for (i, times) in chained.iter_mut().enumerate() {
                times.push(events[i + 1].elapsed_ms_since(&events[i]).map_err(err("timer"))? * 1e3);
            }
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let floor = median(floor);
        Ok((alone.into_iter().map(|a| (median(a) - floor).max(0.0)).collect(), chained.into_iter().map(median).collect(), floor))
    }

    fn launch_node(&mut self, i: usize, s: &Stream) -> Result<(), String> {
        let l = &self.launches[i];
        let ostinato_cuda::lower::Callee::Kernel(k) = l.callee else { return Err("baselines submit kernel nodes only".into()) };
        s.launch(&self.kernels[k.index()], l.dims, &mut self.args[i], false).map_err(|e| format!("launch node {i}: {e}"))
    }
}

impl Arm for Baseline {
    fn probe_calls(&mut self, on: bool) {
        self.probes = on;
    }
    fn write_dot(&self, path: &std::path::Path) -> Option<Result<(), String>> {
        self.graphs.first().map(|g| g.write_dot(path).map_err(|e| e.to_string()))
    }
    fn sample(&mut self, w: &Workload, init: &[Option<Vec<u8>>]) -> Result<RawSample, String> {
        for (i, bytes) in init.iter().enumerate() {
            if let (Some(bytes), true) = (bytes, self.written[i]) {
                self.memory.root(i)?.write(0, bytes).map_err(err("reset"))?;
            }
        }
        self.streams[0].record(&self.timer.0).map_err(err("timer"))?;
        let t = Instant::now();
        for r in 0..w.replays {
            match self.kind {
                ArmKind::Eager => {
                    self.set_slot(w, r);
                    self.enqueue(w, false)?;
                }
                _ => {
                    let gi = if self.graphs.len() > 1 { r % self.graphs.len() } else { 0 };
                    self.graphs[gi].launch(&self.streams[0]).map_err(err("graph launch"))?;
                }
            }
        }
        let host_us = t.elapsed().as_secs_f64() * 1e6;
        self.streams[0].record(&self.timer.1).map_err(err("timer"))?;
        self.timer.1.synchronize().map_err(err("sync"))?;
        let gpu_us = self.timer.1.elapsed_ms_since(&self.timer.0).map_err(err("timer"))? * 1e3;
        let mut outputs = Vec::new();
        for &b in &w.checked {
            let decl = w.graph.buffer(b);
            let mut v = vec![0u8; decl.size as usize];
            let root = decl.root.index();
            self.memory.root(root)?.read(decl.root_offset as usize, &mut v).map_err(err("read"))?;
            outputs.push(v);
        }
        let (mut replay_call_us, mut replay_single_us) = (None, None);
        if let Some(graph) = self.graphs.first().filter(|_| self.probes) {
            let s0 = &self.streams[0];
            let t = Instant::now();
            for _ in 0..CALL_BURST {
                graph.launch(s0).map_err(err("graph launch"))?;
            }
            replay_call_us = Some(t.elapsed().as_secs_f64() * 1e6 / CALL_BURST as f64);
            s0.synchronize().map_err(err("sync"))?;
            let step = |call: bool| if call { graph.launch(s0).map_err(err("graph launch")) } else { s0.synchronize().map_err(err("sync")) };
            replay_single_us = Some(single_call_us(step)?);
        }
        Ok(RawSample { gpu_us: Some(gpu_us), host_us, outputs, replay_call_us, replay_single_us })
    }
}

/// Puts the process in the state that plain kernel launches on a second stream leave every later CUDA
/// graph in (docs/fences.md decision 7), the way the driver-state probe saw it set: Ostinato's arm on the serial
/// 941 × 1 chain (a scratch row), then twice the eager baseline (a stream of its own, 24 samples of 941
/// plain launches) followed by the chain again. Returns the chain's GPU µs per dispatch before and
/// after, so the report shows whether the state changed.
pub fn enter_multi_stream_regime(device: &Device, modules: &BuiltinModules, backend: &CudaBackend) -> Result<[f64; 2], String> {
    let w = crate::families::grid::dispatch_grid(941, 1, false, 1);
    let init = crate::matrix::init_bytes(&w);
    let memory = RowMemory::new(device, &w, 0, &init)?;
    let plan = Plan::compile(&w.graph).map_err(err("plan"))?;
    let mut chain = OstinatoCuda::new(backend, &w, bind_cuda(backend, &w, &plan)?, &memory, &init)?;
    let before = median_gpu_us(&mut chain, &w, &init, 7)?;
    for _ in 0..2 {
        let mut eager = Baseline::new(device, &w, baseline_kernels(modules, backend, &w, ArmKind::Eager)?, ArmKind::Eager, &memory, &init)?;
        for _ in 0..24 {
            eager.sample(&w, &init)?;
        }
        drop(eager);
        median_gpu_us(&mut chain, &w, &init, 7)?;
    }
    Ok([before, median_gpu_us(&mut chain, &w, &init, 7)?])
}
