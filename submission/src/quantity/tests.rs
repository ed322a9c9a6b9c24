use super::*;

#[test]
fn quantities_are_written_back_in_gos_canonical_form() {
    let cases = [
        ("1", "1"),
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1.5", "1500m"),
        ("250m", "250m"),
        ("2000000", "2M"),
        ("1500000", "1500k"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("512", "512"),
        ("0.5Ki", "512"),
        ("1G", "1G"),
        ("1000M", "1G"),
        ("1e3", "1e3"),
        ("1E6", "1e6"),
        ("100n", "100n"),
        ("0", "0"),
        ("-2", "-2"),
        ("+3", "3"),
    ];
    for (text, want) in cases {
        let q = Quantity::parse(text).expect(text);
        assert_eq!(q.to_string(), want, "{text}");
    }
}

#[test]
fn quantities_compare_exactly_across_suffixes() {
    let q = |s: &str| Quantity::parse(s).expect(s);
    assert_eq!(q("1"), q("1000m"));
    assert_eq!(q("1Ki"), q("1024"));
    assert!(q("1Gi") > q("1G"));
    assert!(q("999m") < q("1"));
    assert!(q("1.1") > q("1"));
    assert_eq!(q("1Mi") + q("1Mi"), q("2Mi"));
    assert_eq!((q("500m") + q("1500m")).to_string(), "2");
    assert_eq!((q("1Gi") - q("512Mi")).to_string(), "512Mi");
    assert_eq!((Quantity::ZERO + q("1Gi")).to_string(), "1Gi");
    assert_eq!(q("1.0000000001").milli(), 1001);
}

#[test]
fn malformed_quantities_are_refused() {
    for text in ["", "abc", "1.2.3", "1x", "Gi", ".", "1e", "1e+", "1Gix"] {
        assert_eq!(
            Quantity::parse(text).map_err(|e| e.kind()),
            Err("Format"),
            "{text:?}"
        );
    }
    assert_eq!(
        Quantity::parse("1e100").map_err(|e| e.kind()),
        Err("TooLarge")
    );
}
