//! PNG for `sqos plot -o FILE.png`: the plot's SVG rasterised with resvg. The fonts come from the
//! `dejavu` crate, never from the system, so a PNG looks the same on a bare CI machine (no
//! fontconfig, no fonts installed) as on a desktop, and the same bytes come out everywhere.

use std::sync::Arc;

use resvg::{tiny_skia, usvg};

#[derive(Debug, thiserror::Error)]
pub enum PngError {
    #[error("the plot's SVG did not parse: {0}")]
    Svg(#[from] usvg::Error),
    #[error("a {width}×{height} picture at scale {scale} is too large to rasterise")]
    TooLarge { width: f32, height: f32, scale: f32 },
    #[error("PNG encoding failed: {0}")]
    Encode(String),
}

/// Largest side in pixels: a plot of many flows at a high scale must not allocate gigabytes.
const MAX_SIDE: f32 = 16_384.0;

fn options() -> usvg::Options<'static> {
    let mut db = usvg::fontdb::Database::new();
    db.load_font_data(dejavu::sans::regular().to_vec());
    db.load_font_data(dejavu::sans::bold().to_vec());
    db.set_sans_serif_family("DejaVu Sans");
    usvg::Options {
        font_family: "DejaVu Sans".into(),
        fontdb: Arc::new(db),
        ..usvg::Options::default()
    }
}

/// Rasterises `svg` at `scale` (2 = twice the SVG's user units per side) into PNG bytes.
pub fn svg_to_png(svg: &str, scale: f32) -> Result<Vec<u8>, PngError> {
    let tree = usvg::Tree::from_str(svg, &options())?;
    let size = tree.size();
    let (w, h) = (size.width() * scale, size.height() * scale);
    let too_large = PngError::TooLarge {
        width: size.width(),
        height: size.height(),
        scale,
    };
    if !(w >= 1.0 && h >= 1.0 && w <= MAX_SIDE && h <= MAX_SIDE) {
        return Err(too_large);
    }
    let mut pixmap = tiny_skia::Pixmap::new(w.ceil() as u32, h.ceil() as u32).ok_or(too_large)?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PngError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVG: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" viewBox="0 0 40 20"><rect x="0" y="0" width="20" height="20" fill="#ff0000"/><text x="22" y="15" font-family="DejaVu Sans" font-size="14">A</text></svg>"##;

    fn decode(png: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut d = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .expect("png header");
        let mut buf = vec![0; d.output_buffer_size().expect("size")];
        let info = d.next_frame(&mut buf).expect("frame");
        (info.width, info.height, buf)
    }

    #[test]
    fn scales_and_paints_shapes_and_text() {
        let png = svg_to_png(SVG, 2.0).expect("png");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let (w, h, px) = decode(&png);
        assert_eq!((w, h), (80, 40));
        let at = |x: usize, y: usize| {
            let i = (y * w as usize + x) * 4;
            (px[i], px[i + 1], px[i + 2])
        };
        assert_eq!(at(10, 10), (255, 0, 0));
        // The glyph "A" (embedded DejaVu Sans) puts dark pixels right of the square.
        let dark = (44..80)
            .flat_map(|x| (0..40).map(move |y| (x, y)))
            .filter(|&(x, y)| at(x, y).0 < 128)
            .count();
        assert!(dark > 20, "text was not rendered: {dark} dark pixels");
    }

    #[test]
    fn refuses_absurd_sizes_and_bad_svg() {
        assert!(matches!(
            svg_to_png(SVG, 1000.0),
            Err(PngError::TooLarge { .. })
        ));
        assert!(matches!(svg_to_png("<svg", 1.0), Err(PngError::Svg(_))));
    }
}
