//! The trace as an SVG timeline drawn with `plotters`: a row per place (and per overlap within one),
//! each bar coloured by its kernel and labelled where it is wide enough (white on a dark bar, black
//! on a light one), the idle gaps on a row of their own at the bottom, the critical path outlined in
//! red with its steps joined by red lines, and each tile hand-off as a teal arrow from its producer's
//! bar to its consumer's start.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use ostinato::{EdgeKind, Plan, Trace};
use plotters::prelude::*;

use super::{check_shape, origin, rows, unit_name};
use crate::error::RuntimeError;

const WIDTH: u32 = 1400;
const ROW_PX: u32 = 24;
/// Plot width in pixels, roughly (the chart less its label area and margins).
const PLOT_PX: f64 = 1200.0;
/// The colour of a tile hand-off's arrow.
const HANDOFF: RGBColor = RGBColor(0, 150, 136);

/// The SVG timeline of `trace` (of `plan`).
pub fn svg(trace: &Trace, plan: &Plan) -> Result<String, RuntimeError> {
    check_shape(trace, plan)?;
    let (row_of, labels) = rows(trace);
    let n_rows = labels.len() + 1;
    let t0 = origin(trace);
    let us = |ns: u64| ns.saturating_sub(t0) as f64 / 1000.0;
    let end = trace.replays.iter().flatten().map(|s| us(s.end_ns)).fold(0.0f64, f64::max).max(1e-3);
    // Row k (from the top) at height n_rows - 1 - k; the idle row is the bottom one, at 0.
    let y_of = |row: usize| (n_rows - 1 - row) as f64;
    let height = 110 + ROW_PX * n_rows as u32;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<std::io::Error>| RuntimeError::Usage(format!("drawing the SVG timeline: {e}"));
        root.fill(&WHITE).map_err(e)?;
        let mut c = ChartBuilder::on(&root)
            .caption(caption(trace, plan), ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(150)
            .build_cartesian_2d(0f64..end * 1.01, -0.5f64..(n_rows as f64 - 0.5))
            .map_err(e)?;
        let names: Vec<String> = labels.iter().cloned().chain(std::iter::once("idle".to_string())).collect();
        c.configure_mesh()
            .disable_y_mesh()
            .y_labels(n_rows)
            .y_label_formatter(&|y| {
                let k = y.round();
                if (y - k).abs() > 1e-6 || k < 0.0 {
                    return String::new();
                }
                names.get(n_rows - 1 - (k as usize).min(n_rows - 1)).cloned().unwrap_or_default()
            })
            .x_desc("µs from the first bar")
            .draw()
            .map_err(e)?;
        let min_w = end / 2000.0;
        for (r, spans) in trace.replays.iter().enumerate() {
            let critical = trace.critical_path(r);
            for (i, s) in spans.iter().enumerate() {
                let (x0, y) = (us(s.start_ns), y_of(row_of[r][i]));
                let x1 = us(s.end_ns).max(x0 + min_w);
                let name = unit_name(plan, &trace.units[s.unit as usize]);
                let rect = [(x0, y - 0.38), (x1, y + 0.38)];
                c.draw_series(std::iter::once(Rectangle::new(rect, colour(&name).filled()))).map_err(e)?;
                if critical.contains(&i) {
                    c.draw_series(std::iter::once(Rectangle::new(rect, RED.stroke_width(2)))).map_err(e)?;
                }
                let ink = label_colour(colour(&name));
                let chars = ((x1 - x0) / end * PLOT_PX / 6.5) as usize;
                if chars >= 4 {
                    let text: String =
                        if name.chars().count() <= chars { name } else { name.chars().take(chars.saturating_sub(1)).chain(std::iter::once('…')).collect() };
                    let font = ("sans-serif", 10).into_font().color(&ink);
                    c.draw_series(std::iter::once(Text::new(text, (x0 + min_w, y + 0.15), font))).map_err(e)?;
                }
            }
            c.draw_series(handoff_arrows(trace, plan, r, &|i| (us(spans[i].start_ns), y_of(row_of[r][i])), end)).map_err(e)?;
            // The steps of the critical path: each bar's end to the next one's start.
            let steps = critical.windows(2).map(|w| {
                let (a, b) = (&spans[w[0]], &spans[w[1]]);
                PathElement::new(vec![(us(a.end_ns), y_of(row_of[r][w[0]])), (us(b.start_ns), y_of(row_of[r][w[1]]))], RED.stroke_width(1))
            });
            c.draw_series(steps).map_err(e)?;
            if let Some(sum) = trace.summary(r) {
                let gaps =
                    sum.gaps.iter().map(|&(a, b)| Rectangle::new([(us(a), -0.3), (us(b).max(us(a) + min_w), 0.3)], RGBColor(214, 96, 77).mix(0.6).filled()));
                c.draw_series(gaps).map_err(e)?;
            }
        }
        root.present().map_err(e)?;
    }
    Ok(out)
}

/// The title line: what ran, and replay 0's sums.
fn caption(trace: &Trace, plan: &Plan) -> String {
    let head = format!("{}: {} nodes, {} edges, {} replays", trace.backend, plan.node_count(), plan.edges().len(), trace.replays.len());
    match trace.summary(0) {
        Some(s) if !trace.replays.is_empty() => format!(
            "{head} — replay 0: {:.1} µs, nodes {:.1} µs, busy {:.1} µs, idle {:.1} µs in {} gaps (red: critical path{})",
            s.step_ns as f64 / 1e3,
            s.sum_ns as f64 / 1e3,
            s.busy_ns as f64 / 1e3,
            s.idle_ns as f64 / 1e3,
            s.gaps.len(),
            if trace.edges.iter().any(|e| e.kind == EdgeKind::Handoff) { "; teal arrows: tile hand-offs" } else { "" }
        ),
        _ => head,
    }
}

/// A colour per kernel name (the same name, the same colour, within one build).
fn colour(name: &str) -> RGBAColor {
    let key = name.split(':').next().unwrap_or(name);
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    Palette99::pick(h.finish() as usize % 99).to_rgba().mix(0.85)
}

/// Black or white, whichever reads better on `bar` (drawn over white): white where the bar's
/// relative luminance is below that of mid grey.
fn label_colour(bar: RGBAColor) -> RGBColor {
    let RGBAColor(r, g, b, a) = bar;
    let over_white = |c: u8| a * f64::from(c) + (1.0 - a) * 255.0;
    let luminance = 0.2126 * over_white(r) + 0.7152 * over_white(g) + 0.0722 * over_white(b);
    if luminance < 140.0 {
        WHITE
    } else {
        BLACK
    }
}

/// Replay `r`'s tile hand-offs as arrows from the producer's bar (its start, where its first tiles
/// come from) to the consumer's start; `at(i)` is bar `i`'s start point, `end` the time axis' length.
fn handoff_arrows<'a>(trace: &'a Trace, plan: &Plan, r: usize, at: &'a dyn Fn(usize) -> (f64, f64), end: f64) -> Vec<PathElement<(f64, f64)>> {
    let unit_of = trace.unit_of(plan.node_count());
    let mut bar_of = vec![usize::MAX; trace.units.len()];
    for (i, s) in trace.replays[r].iter().enumerate() {
        bar_of[s.unit as usize] = i;
    }
    let bar = |v: ostinato::NodeId| unit_of.get(v.index()).and_then(|&u| bar_of.get(u)).copied().filter(|&i| i != usize::MAX);
    let (head_x, head_y) = (end / 250.0, 0.18);
    let mut out = Vec::new();
    for e in trace.edges.iter().filter(|e| e.kind == EdgeKind::Handoff) {
        let (Some(a), Some(b)) = (bar(e.from), bar(e.to)) else { continue };
        let ((xa, ya), (xb, yb)) = (at(a), at(b));
        // The shaft and the arrowhead (pointing along the time axis into the consumer's start), each
        // over a white halo so that it shows on a bar of any colour.
        let shaft = vec![(xa, ya), (xb, yb)];
        let head = vec![(xb - head_x, yb + head_y), (xb, yb), (xb - head_x, yb - head_y)];
        for path in [shaft, head] {
            out.push(PathElement::new(path.clone(), WHITE.stroke_width(4)));
            out.push(PathElement::new(path, HANDOFF.stroke_width(2)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label reads on its bar: white on a dark bar (the navy the `copy` kernel's name hashed to was
    /// labelled black), black on a light one; every kernel name's bar gets the one that contrasts more.
    #[test]
    fn a_label_contrasts_with_its_bar() {
        assert_eq!(label_colour(RGBColor(0, 0, 128).to_rgba()), WHITE);
        assert_eq!(label_colour(RGBColor(255, 230, 120).to_rgba()), BLACK);
        let lum = |c: RGBColor| 0.2126 * f64::from(c.0) + 0.7152 * f64::from(c.1) + 0.0722 * f64::from(c.2);
        for name in ["copy", "fill", "mix", "mix_alt", "gemv", "rmsnorm", "attention", "fused ×12: a … b"] {
            let bar = colour(name);
            let RGBAColor(r, g, b, a) = bar;
            let over = |c: u8| a * f64::from(c) + (1.0 - a) * 255.0;
            let l = 0.2126 * over(r) + 0.7152 * over(g) + 0.0722 * over(b);
            let ink = lum(label_colour(bar));
            assert!((ink - l).abs() >= 100.0, "`{name}`: label luminance {ink} on a bar of {l}");
        }
    }
}
