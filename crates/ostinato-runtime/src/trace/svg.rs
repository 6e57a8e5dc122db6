//! The trace as an SVG timeline drawn with `plotters`: a row per place (and per overlap within one),
//! each bar coloured by its kernel and labelled where it is wide enough, the idle gaps on a row of
//! their own at the bottom, and the critical path outlined in red, its hand-offs joined by red lines.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use ostinato::{Plan, Trace};
use plotters::prelude::*;

use super::{check_shape, origin, rows, unit_name};
use crate::error::RuntimeError;

const WIDTH: u32 = 1400;
const ROW_PX: u32 = 24;
/// Plot width in pixels, roughly (the chart less its label area and margins).
const PLOT_PX: f64 = 1200.0;

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
                let chars = ((x1 - x0) / end * PLOT_PX / 6.5) as usize;
                if chars >= 4 {
                    let text: String =
                        if name.chars().count() <= chars { name } else { name.chars().take(chars.saturating_sub(1)).chain(std::iter::once('…')).collect() };
                    c.draw_series(std::iter::once(Text::new(text, (x0 + min_w, y + 0.15), ("sans-serif", 10).into_font()))).map_err(e)?;
                }
            }
            // The hand-offs of the critical path: each bar's end to the next one's start.
            let hand_offs = critical.windows(2).map(|w| {
                let (a, b) = (&spans[w[0]], &spans[w[1]]);
                PathElement::new(vec![(us(a.end_ns), y_of(row_of[r][w[0]])), (us(b.start_ns), y_of(row_of[r][w[1]]))], RED.stroke_width(1))
            });
            c.draw_series(hand_offs).map_err(e)?;
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
            "{head} — replay 0: {:.1} µs, nodes {:.1} µs, busy {:.1} µs, idle {:.1} µs in {} gaps (red: critical path)",
            s.step_ns as f64 / 1e3,
            s.sum_ns as f64 / 1e3,
            s.busy_ns as f64 / 1e3,
            s.idle_ns as f64 / 1e3,
            s.gaps.len()
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
