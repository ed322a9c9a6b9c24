//! PNG line charts (plotters' bitmap backend; text drawn with a TrueType font read at run time,
//! so no system font stack is linked).

use std::path::Path;

use anyhow::{Context, anyhow};
use plotters::prelude::*;

/// Where the font is looked for (Debian's `fonts-dejavu-core`, which scripts/install-deps.sh
/// installs).
const FONTS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers the font plotters draws text with; an error when none is found.
pub fn init() -> anyhow::Result<()> {
    let path = FONTS
        .iter()
        .find(|p| Path::new(p).exists())
        .ok_or_else(|| anyhow!("no DejaVuSans.ttf in {FONTS:?}"))?;
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {path}"))?;
    // Registered once for the process' life.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow!("{path} is not a font plotters can read"))?;
    Ok(())
}

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A chart of `series` against x (log scale when `log_x`), y from 0.
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    log_x: bool,
    series: &[Series],
) -> anyhow::Result<()> {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut y1: f64 = 0.0;
    for (x, y) in points() {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y1 = y1.max(*y);
    }
    if !x0.is_finite() {
        return Ok(());
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let palette = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .draw()
                .map_err(|e| anyhow!("{e:?}"))?;
            for (i, s) in series.iter().enumerate() {
                let color = palette[i % palette.len()];
                chart
                    .draw_series(LineSeries::new(
                        s.points.iter().copied(),
                        color.stroke_width(2),
                    ))
                    .map_err(|e| anyhow!("{e:?}"))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))
                    .map_err(|e| anyhow!("{e:?}"))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| anyhow!("{e:?}"))?;
        }};
    }
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70);
    if log_x {
        draw!(
            builder
                .build_cartesian_2d((x0..x1).log_scale(), 0.0..y1)
                .map_err(|e| anyhow!("{e:?}"))?
        );
    } else {
        draw!(
            builder
                .build_cartesian_2d(x0..x1, 0.0..y1)
                .map_err(|e| anyhow!("{e:?}"))?
        );
    }
    root.present().map_err(|e| anyhow!("{e:?}"))?;
    Ok(())
}
