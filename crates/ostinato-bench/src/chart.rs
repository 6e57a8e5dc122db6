//! `chart.svg`: each row's time per dispatch by arm on a log scale — a dot at the median, a whisker
//! over its 95% bootstrap interval — with the value axis from the tick at or below every interval to
//! the one at or above it (ticks at 1, 2 and 5 of each decade, so there is always one below the
//! lowest dot and no empty decade), the row names written below the plot (never over its dots) and
//! the legend in a band of its own above it.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::metric;
use crate::RowResult;

/// Pixels per row, and for the legend's band.
const ROW_PX: u32 = 70;
const LEGEND_PX: u32 = 28;
/// Pixels per character of a row name (11 px sans-serif), for the band they are written in.
const CHAR_PX: u32 = 6;

/// Writes the chart of `rows` to `path`, titled `title`, its value axis named `axis`.
pub(crate) fn write(path: &Path, title: &str, axis: &str, rows: &[RowResult]) -> Result<(), String> {
    let arms = super::report::arms_of(rows);
    let points = points(rows, &arms);
    let (lo, hi) = axis_range(points.iter().flat_map(|p| [p.lo, p.median, p.hi]));
    let names_px = 12 + CHAR_PX * rows.iter().map(|r| r.id.chars().count() as u32).max().unwrap_or(4);
    let width = (160 + ROW_PX * rows.len() as u32).max(900);
    let height = 60 + LEGEND_PX + 420 + names_px;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<std::io::Error>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (legend, plot) = root.split_vertically(40 + LEGEND_PX);
    legend.draw(&Text::new(title.to_string(), (12, 8), ("sans-serif", 18).into_font())).map_err(e)?;
    for (ai, a) in arms.iter().enumerate() {
        let x = 20 + 190 * ai as i32;
        legend.draw(&Circle::new((x, 44), 4, arm_colour(ai).filled())).map_err(e)?;
        legend
            .draw(&Text::new(a.to_string(), (x + 10, 44), TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center))))
            .map_err(e)?;
    }
    let mut c = ChartBuilder::on(&plot)
        .margin_left(12)
        .margin_right(16)
        .margin_top(8)
        .x_label_area_size(names_px)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(rows.len() as f64 - 0.5), (lo..hi).log_scale().with_key_points(ticks(lo, hi)))
        .map_err(e)?;
    c.configure_mesh().disable_x_mesh().x_labels(0).y_label_formatter(&|v| tick_text(*v)).y_desc(axis).draw().map_err(e)?;
    let name_style = TextStyle::from(("sans-serif", 11).into_font().transform(FontTransform::Rotate90)).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, r) in rows.iter().enumerate() {
        let (x, y) = c.backend_coord(&(i as f64, lo));
        root.draw(&Text::new(r.id.clone(), (x, y + 8), name_style.clone())).map_err(e)?;
    }
    for p in &points {
        let colour = arm_colour(p.arm);
        let x = p.row as f64 + (p.arm as f64 - (arms.len() as f64 - 1.0) / 2.0) * 0.1;
        c.draw_series(whisker(x, p).into_iter().map(|w| PathElement::new(w, colour.stroke_width(1)))).map_err(e)?;
        c.draw_series(std::iter::once(Circle::new((x, p.median), 4, colour.filled()))).map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// One arm's median and interval in one row.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    row: usize,
    arm: usize,
    median: f64,
    lo: f64,
    hi: f64,
}

/// A dot's whisker at `x`: its interval, and a cap at each end.
fn whisker(x: f64, p: &Point) -> [Vec<(f64, f64)>; 3] {
    let cap = 0.025;
    [vec![(x, p.lo), (x, p.hi)], vec![(x - cap, p.lo), (x + cap, p.lo)], vec![(x - cap, p.hi), (x + cap, p.hi)]]
}

/// Every positive median of a row that ran ok, with its interval (clamped to positive values: the
/// axis is logarithmic).
fn points(rows: &[RowResult], arms: &[&str]) -> Vec<Point> {
    let mut out = Vec::new();
    for (row, r) in rows.iter().enumerate().filter(|(_, r)| r.ok) {
        for (arm, a) in arms.iter().enumerate() {
            if let Some((median, (lo, hi))) = metric(r, a).filter(|m| m.0 > 0.0) {
                out.push(Point { row, arm, median, lo: lo.clamp(f64::MIN_POSITIVE, median), hi: hi.max(median) });
            }
        }
    }
    out
}

/// The value axis: from the tick (1, 2 or 5 times a power of ten) at or below the least value to
/// the one at or above the greatest (the next tick up where they coincide); 0.1–10 µs with no values.
fn axis_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (min, max) = values.filter(|v| *v > 0.0 && v.is_finite()).fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    if min > max {
        return (0.1, 10.0);
    }
    let below = |v: f64| {
        let decade = 10f64.powf(v.log10().floor());
        [5.0, 2.0, 1.0].iter().map(|m| decade * m).find(|t| *t <= v * 1.000_001).unwrap_or(decade)
    };
    let above = |v: f64| {
        let decade = 10f64.powf(v.log10().floor());
        [1.0, 2.0, 5.0, 10.0].iter().map(|m| decade * m).find(|t| *t >= v / 1.000_001).unwrap_or(decade * 10.0)
    };
    let (lo, hi) = (below(min), above(max));
    if hi <= lo {
        (lo, above(lo * 1.5))
    } else {
        (lo, hi)
    }
}

/// The axis' ticks: 1, 2 and 5 times each power of ten from `lo` to `hi`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi * 1.000_001 {
        for m in [1.0, 2.0, 5.0] {
            let v = decade * m;
            if v >= lo / 1.000_001 && v <= hi * 1.000_001 {
                out.push(v);
            }
        }
        decade *= 10.0;
    }
    out
}

/// A tick's label: as few digits as it needs (`0.05`, `2`, `1000`).
fn tick_text(v: f64) -> String {
    let t = format!("{v:.4}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn arm_colour(arm: usize) -> RGBAColor {
    Palette99::pick(arm).to_rgba()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_spans_every_interval_from_a_tick_below_to_a_tick_above() {
        assert_eq!(axis_range([0.31, 2.0, 1925.589].into_iter()), (0.2, 2000.0));
        assert_eq!(axis_range([3.8, 7.9].into_iter()), (2.0, 10.0));
        assert_eq!(axis_range([10.0].into_iter()), (10.0, 20.0));
        assert_eq!(axis_range(std::iter::empty()), (0.1, 10.0));
        let t = ticks(0.1, 10.0);
        assert_eq!(t.iter().map(|v| tick_text(*v)).collect::<Vec<_>>(), ["0.1", "0.2", "0.5", "1", "2", "5", "10"]);
        assert_eq!(ticks(2.0, 2000.0).iter().map(|v| tick_text(*v)).collect::<Vec<_>>(), ["2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000"]);
        // Every value has a tick at or below it and one at or above it, within one 1-2-5 step.
        for v in [0.31, 0.999, 3.8, 844.5, 1925.589] {
            let (lo, hi) = axis_range([v].into_iter());
            assert!(lo <= v && v <= hi && hi / lo <= 2.5 + 1e-9, "{v}: {lo}..{hi}");
        }
    }

    /// The chart as written: a dot and a whisker over its interval per arm, the row names below the
    /// plot.
    #[test]
    fn every_dot_has_its_interval_as_a_whisker() {
        use crate::arms::ArmKind;
        let arms = [(ArmKind::HostSerial, 7.8, 4.06, 8.3), (ArmKind::OstinatoHost, 3.96, 3.95, 3.98)]
            .iter()
            .map(|&(k, m, lo, hi)| {
                let mut a = crate::matrix::ArmResult::new_for_test(k);
                a.host_us_per_dispatch = Some(crate::Stat { median: m, ci_lo: lo, ci_hi: hi });
                a
            })
            .collect();
        let r = RowResult {
            id: "grid/serial/n941/b1".into(),
            family: "dispatch-grid serial".into(),
            dispatches_per_replay: 941,
            replays_per_sample: 1,
            check: "exact".into(),
            ok: true,
            arm_order: vec![],
            buffer_addresses: vec![],
            arms,
            decode: None,
            timeline: None,
            protocol: None,
        };
        let pts = points(std::slice::from_ref(&r), &["host-serial", "ostinato-host"]);
        assert_eq!(pts[0], Point { row: 0, arm: 0, median: 7.8, lo: 4.06, hi: 8.3 });
        let w = whisker(1.0, &pts[0]);
        assert_eq!(w[0], vec![(1.0, 4.06), (1.0, 8.3)], "the whisker spans the interval");
        assert!(w[1].iter().all(|p| p.1 == 4.06) && w[2].iter().all(|p| p.1 == 8.3), "capped at both ends");
        let dir = std::env::temp_dir().join(format!("ostinato-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        write(&path, "test", "wall µs per dispatch (log scale)", &[r]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(svg.matches("<circle").count(), 2 + 2, "two dots and two legend marks");
        let text = |t: &str| svg.contains(&format!(">\n{t}\n</text>"));
        assert!(text("grid/serial/n941/b1") && text("2") && text("5") && text("10"), "ticks from 2 below the lowest dot to 10 above the highest: {svg}");
    }
}
