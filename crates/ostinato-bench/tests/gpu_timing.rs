//! The timing gate in front of a CUDA sample (`cuda_raw::Gate`, `--cuda-timing gated`) on the GPU: an
//! interval enqueued behind it runs back to back once it opens, so host time spent between its two
//! events is not in their GPU time; the same interval on an idle stream holds it (which is what makes
//! this test able to fail). Skipped with a message where there is no CUDA device.

use std::sync::Arc;
use std::time::Duration;

use ostinato_bench::cuda_raw::{Event, Gate, Stream};
use ostinato_cuda::{Device, DeviceSelector};

/// The host's pause between the two events.
const PAUSE: Duration = Duration::from_millis(20);

fn device_or_skip(test: &str) -> Option<Device> {
    if !ostinato_cuda::driver_available() {
        ostinato_testkit::skip(&format!("SKIP {test}: no CUDA driver found"));
        return None;
    }
    match Device::open(&DeviceSelector::from_env().expect("OSTINATO_DEVICE parses")) {
        Ok(d) => Some(d),
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP {test}: {e}"));
            None
        }
    }
}

/// GPU ms between two events recorded on `stream` with the host pausing between them, behind `gate`
/// where given.
fn interval_ms(stream: &Stream, mut gate: Option<&mut Gate>) -> f64 {
    let (a, b) = (Event::new(true).unwrap(), Event::new(true).unwrap());
    if let Some(g) = gate.as_mut() {
        g.close().unwrap();
    }
    stream.record(&a).unwrap();
    std::thread::sleep(PAUSE);
    stream.record(&b).unwrap();
    if let Some(g) = gate.as_mut() {
        g.open();
    }
    b.synchronize().unwrap();
    let ms = b.elapsed_ms_since(&a).unwrap();
    eprintln!("{} interval with a {PAUSE:?} pause on the host: {ms:.4} ms", if gate.is_some() { "gated" } else { "idle" });
    ms
}

#[test]
fn a_gated_interval_leaves_the_hosts_time_out_and_an_idle_one_holds_it() {
    let Some(device) = device_or_skip("a_gated_interval_leaves_the_hosts_time_out_and_an_idle_one_holds_it") else { return };
    device.bind_to_thread().unwrap();
    let stream = Arc::new(Stream::new().unwrap());
    let mut gate = Gate::new(stream.clone()).unwrap();
    let pause_ms = PAUSE.as_secs_f64() * 1e3;
    for _ in 0..3 {
        assert!(interval_ms(&stream, None) >= 0.9 * pause_ms, "an idle stream takes the first event at once");
        assert!(interval_ms(&stream, Some(&mut gate)) < 0.1 * pause_ms, "behind the gate the two events run back to back");
    }
    // A second close before an open is refused (the stream would wait for a count never set).
    gate.close().unwrap();
    assert!(gate.close().is_err());
    // A gate dropped closed opens: the stream drains.
    let (a, b) = (Event::new(true).unwrap(), Event::new(true).unwrap());
    stream.record(&a).unwrap();
    stream.record(&b).unwrap();
    drop(gate);
    stream.synchronize().unwrap();
    assert!(b.elapsed_ms_since(&a).unwrap() >= 0.0);
}
