//! Interoperability with Wireshark: on every capture in `captures/` and `../shared/real-captures/`
//! our SMB2 message counts per command and every SQOS field agree with tshark's, except where we
//! differ on purpose (asserted below and explained in README, "Where sqos and tshark differ").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::*;

/// Captures where we recover more SMB2 messages than tshark, on purpose: after a lost segment
/// we resynchronise on the next NetBIOS + SMB2 header, tshark gives up on the stream.
/// `lossy-network` (generated) has segments missing from the capture: tshark stops decoding the
/// affected streams, we carry on.
const RECOVERS_MORE: &[&str] = &[
    "sv-smb2-frames-gap-payload-logging_smb2-peter-minus-p191.pcap",
    "lossy-network.pcapng.gz",
];

fn recovers_more(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| RECOVERS_MORE.contains(&n))
}

fn compare_counts(path: &Path) -> Result<(), String> {
    compare_counts_with(path, &tshark_smb2_counts(path))
}

/// `compare_counts` with tshark's counts already read.
fn compare_counts_with(path: &Path, theirs: &BTreeMap<String, u64>) -> Result<(), String> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    // Both with the key file beside the capture (the encrypted Samba sessions decrypt).
    let (_, result) = run_with(path, keys_beside(path));
    let ours: BTreeMap<String, u64> = result.stats.by_command.to_names();
    if RECOVERS_MORE.contains(&name) {
        let t: u64 = theirs.values().sum();
        let o: u64 = ours.values().sum();
        if o <= t {
            return Err(format!(
                "{name}: expected to recover more than tshark's {t}, got {o}"
            ));
        }
        return Ok(());
    }
    if ours != *theirs {
        return Err(format!(
            "{name}: SMB2 messages per command differ\n  tshark: {theirs:?}\n  sqos:   {ours:?}"
        ));
    }
    Ok(())
}

#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn smb2_counts_match_tshark_on_real_captures() {
    crate::support::need::tshark();
    let files = captures_in(&crate::support::need::real_captures());
    assert!(
        files.len() >= 19,
        "expected the 19 real captures, found {}",
        files.len()
    );
    let errors: Vec<String> = par_map(&files, |f| compare_counts(f).err())
        .into_iter()
        .flatten()
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn smb2_counts_match_tshark_on_our_captures() {
    crate::support::need::tshark();
    let (files, views) = tshark_on_our_captures();
    let errors: Vec<String> = par_map(files, |f| compare_counts_with(f, &views[f].counts).err())
        .into_iter()
        .flatten()
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// tshark field ↔ our typed value, for one message.
fn our_fields(rec: &sqos::pipeline::SqosRecord) -> Vec<(&'static str, String)> {
    use sqos::pipeline::SqosBody;
    let g = |u: &uuid::Uuid| u.to_string();
    let mut v: Vec<(&'static str, String)> = Vec::new();
    match &rec.body {
        SqosBody::Request(d) => {
            if let Some(r) = &d.message {
                v.push((
                    "smb2.ioctl.sqos.protocol_version",
                    r.protocol_version.0.to_string(),
                ));
                v.push(("smb2.ioctl.sqos.operations", r.options.bits().to_string()));
                v.push(("smb2.ioctl.sqos.logical_flow_id", g(&r.logical_flow_id)));
                v.push(("smb2.ioctl.sqos.policy_id", g(&r.policy_id)));
                v.push(("smb2.ioctl.sqos.initiator_id", g(&r.initiator_id)));
                v.push(("smb2.ioctl.sqos.limit", r.limit.to_string()));
                v.push(("smb2.ioctl.sqos.reservation", r.reservation.to_string()));
                v.push((
                    "smb2.ioctl.sqos.io_count_increment",
                    r.io_count_increment.to_string(),
                ));
                v.push((
                    "smb2.ioctl.sqos.normalized_io_count_increment",
                    r.normalized_io_count_increment.to_string(),
                ));
                v.push((
                    "smb2.ioctl.sqos.latency_increment",
                    r.latency_increment.to_string(),
                ));
                v.push((
                    "smb2.ioctl.sqos.lower_latency_increment",
                    r.lower_latency_increment.to_string(),
                ));
                if let Some(x) = r.v1_1 {
                    v.push((
                        "smb2.ioctl.sqos.bandwidth_limit",
                        x.bandwidth_limit.to_string(),
                    ));
                    v.push((
                        "smb2.ioctl.sqos.kilobyte_count_increment",
                        x.kilobyte_count_increment.to_string(),
                    ));
                }
                if let Some(n) = &r.initiator_name {
                    v.push(("smb2.ioctl.sqos.initiator_name", n.clone()));
                }
                if let Some(n) = &r.initiator_node_name {
                    v.push(("smb2.ioctl.sqos.initiator_node_name", n.clone()));
                }
            }
        }
        SqosBody::Response(d) => {
            if let Some(r) = &d.message {
                v.push((
                    "smb2.ioctl.sqos.protocol_version",
                    r.protocol_version.0.to_string(),
                ));
                // tshark shows the response's Options under the same name as the request's.
                v.push(("smb2.ioctl.sqos.operations", r.options.to_string()));
                v.push(("smb2.ioctl.sqos.logical_flow_id", g(&r.logical_flow_id)));
                v.push(("smb2.ioctl.sqos.policy_id", g(&r.policy_id)));
                v.push(("smb2.ioctl.sqos.initiator_id", g(&r.initiator_id)));
                v.push(("smb2.ioctl.sqos.time_to_live", r.time_to_live.to_string()));
                v.push(("smb2.ioctl.sqos.status", r.status.0.to_string()));
                v.push((
                    "smb2.ioctl.sqos.maximum_io_rate",
                    r.maximum_io_rate.to_string(),
                ));
                v.push((
                    "smb2.ioctl.sqos.minimum_io_rate",
                    r.minimum_io_rate.to_string(),
                ));
                v.push(("smb2.ioctl.sqos.base_io_size", r.base_io_size.to_string()));
                if let Some(bw) = r.maximum_bandwidth {
                    v.push(("smb2.ioctl.sqos.maximum_bandwidth", bw.to_string()));
                }
            }
        }
        sqos::pipeline::SqosBody::NoBuffer => {}
    }
    v
}

const SQOS_TSHARK_FIELDS: &[&str] = &[
    "smb2.ioctl.sqos.protocol_version",
    "smb2.ioctl.sqos.operations",
    "smb2.ioctl.sqos.logical_flow_id",
    "smb2.ioctl.sqos.policy_id",
    "smb2.ioctl.sqos.initiator_id",
    "smb2.ioctl.sqos.limit",
    "smb2.ioctl.sqos.reservation",
    "smb2.ioctl.sqos.io_count_increment",
    "smb2.ioctl.sqos.normalized_io_count_increment",
    "smb2.ioctl.sqos.latency_increment",
    "smb2.ioctl.sqos.lower_latency_increment",
    "smb2.ioctl.sqos.bandwidth_limit",
    "smb2.ioctl.sqos.kilobyte_count_increment",
    "smb2.ioctl.sqos.initiator_name",
    "smb2.ioctl.sqos.initiator_node_name",
    "smb2.ioctl.sqos.time_to_live",
    "smb2.ioctl.sqos.status",
    "smb2.ioctl.sqos.maximum_io_rate",
    "smb2.ioctl.sqos.minimum_io_rate",
    "smb2.ioctl.sqos.base_io_size",
    "smb2.ioctl.sqos.maximum_bandwidth",
];

/// tshark prints integers in hex or decimal depending on the field's base: compare as numbers.
fn normalise(v: &str) -> String {
    if let Some(h) = v.strip_prefix("0x") {
        if let Ok(n) = u64::from_str_radix(h, 16) {
            return n.to_string();
        }
    }
    v.to_string()
}

/// (frame, field) → values in message order, from tshark.
fn tshark_sqos(path: &Path) -> BTreeMap<(u64, String), Vec<String>> {
    let mut fields = vec!["frame.number"];
    fields.extend_from_slice(SQOS_TSHARK_FIELDS);
    sqos_cells(
        &tshark_fields(path, Some("smb2.ioctl.function == 0x00090350"), &fields),
        1,
    )
}

/// The SQOS cells of tshark's rows: frame.number in the first column, SQOS_TSHARK_FIELDS from
/// column `first`. A frame without SQOS fields adds none.
fn sqos_cells(rows: &[Vec<String>], first: usize) -> BTreeMap<(u64, String), Vec<String>> {
    let mut m = BTreeMap::new();
    for row in rows {
        let frame: u64 = row[0].parse().expect("frame number");
        for (i, f) in SQOS_TSHARK_FIELDS.iter().enumerate() {
            let cell = row.get(i + first).map(String::as_str).unwrap_or("");
            let vals: Vec<String> = cell
                .split('|')
                .filter(|s| !s.is_empty())
                .map(normalise)
                .collect();
            if !vals.is_empty() {
                m.insert((frame, f.to_string()), vals);
            }
        }
    }
    m
}

/// tshark's view of one capture, from one pass: SMB2 messages per command and the SQOS cells.
struct TsharkView {
    counts: BTreeMap<String, u64>,
    sqos: BTreeMap<(u64, String), Vec<String>>,
}

/// Our captures and tshark's view of each, read once for the two tests that compare with them
/// (the counts and the SQOS fields): tshark's dissection is most of their time, and one pass with
/// the union of their fields (`-Y smb2`; the SQOS fields exist only in SQOS messages) gives
/// each test what its own pass gave.
fn tshark_on_our_captures() -> &'static (Vec<PathBuf>, BTreeMap<PathBuf, TsharkView>) {
    static VIEWS: OnceLock<(Vec<PathBuf>, BTreeMap<PathBuf, TsharkView>)> = OnceLock::new();
    VIEWS.get_or_init(|| {
        let mut files = captures_in(&repo().join("captures"));
        files.extend(captures_in(&repo().join("captures/real")));
        let mut fields = vec!["frame.number", "smb2.cmd"];
        fields.extend_from_slice(SQOS_TSHARK_FIELDS);
        let views = par_map(&files, |f| {
            let rows = tshark_fields(f, Some("smb2"), &fields);
            let mut counts = BTreeMap::new();
            for row in &rows {
                add_smb2_cmds(&mut counts, &row[1]);
            }
            let sqos = sqos_cells(&rows, 2);
            TsharkView { counts, sqos }
        });
        let views = files.iter().cloned().zip(views).collect();
        (files, views)
    })
}

fn ours_sqos(path: &Path) -> BTreeMap<(u64, String), Vec<String>> {
    let (c, _) = run_with(path, keys_beside(path));
    let mut m: BTreeMap<(u64, String), Vec<String>> = BTreeMap::new();
    for rec in &c.sqos {
        for (f, v) in our_fields(rec) {
            m.entry((rec.frame, f.to_string())).or_default().push(v);
        }
    }
    m
}

/// Every SQOS field of every message agrees with tshark's decode.
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn sqos_fields_match_tshark_on_our_captures() {
    crate::support::need::tshark();
    let (files, views) = tshark_on_our_captures();
    // Per capture: the cells compared and what differed.
    let per_capture = par_map(files, |f| {
        let theirs = &views[f].sqos;
        let ours = ours_sqos(f);
        let error = if recovers_more(f) {
            // Every message tshark decoded, we decoded the same; and we decoded more.
            let missing: Vec<_> = theirs
                .iter()
                .filter(|(k, v)| ours.get(*k) != Some(*v))
                .take(5)
                .collect();
            (!missing.is_empty() || ours.len() <= theirs.len()).then(|| {
                format!(
                    "{}: expected a strict superset of tshark's {} cells, got {} (differing: {missing:?})",
                    f.display(),
                    theirs.len(),
                    ours.len()
                )
            })
        } else if *theirs != ours {
            let only_t: Vec<_> = theirs
                .iter()
                .filter(|(k, v)| ours.get(*k) != Some(*v))
                .take(5)
                .collect();
            let only_o: Vec<_> = ours
                .iter()
                .filter(|(k, v)| theirs.get(*k) != Some(*v))
                .take(5)
                .collect();
            Some(format!(
                "{}:\n  tshark has {only_t:?}\n  sqos has   {only_o:?}",
                f.display()
            ))
        } else {
            None
        };
        (theirs.len(), error)
    });
    let compared: usize = per_capture.iter().map(|(n, _)| n).sum();
    let errors: Vec<String> = per_capture.into_iter().filter_map(|(_, e)| e).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    // The Samba and generated captures carry hundreds of SQOS messages: an empty comparison
    // would mean neither side decoded any, which must not pass.
    assert!(
        compared > 1000,
        "only {compared} (frame, field) cells compared with tshark"
    );
    eprintln!("compared {compared} (frame, field) cells with tshark");
}

/// `sqos synth --compress`: with every algorithm, unchained and chained (Pattern_V1 included),
/// in clear and encrypted, tshark 4.0 decompresses the messages too, and we agree with it on
/// the compressed messages, the SMB2 messages per command inside them and every SQOS field.
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn sqos_fields_match_tshark_inside_compressed_messages() {
    use sqos::smb2::compress::Algorithm;
    use sqos::smb2::crypto::Cipher;
    crate::support::need::tshark();
    let root = scratch("sqos-interop-compress");
    let root = root.path();
    let mut variants = Vec::new();
    for algo in [Algorithm::Lznt1, Algorithm::Lz77, Algorithm::Lz77Huffman] {
        for chained in [false, true] {
            variants.push((algo, chained, None));
        }
    }
    variants.push((Algorithm::Lz77, true, Some(Cipher::Aes256Gcm)));
    variants.push((Algorithm::Lznt1, false, Some(Cipher::Aes128Ccm)));
    let variants: Vec<_> = variants.into_iter().enumerate().collect();
    // Per variant: the cells compared and what differed.
    let per_variant = par_map(&variants, |&(i, (algo, chained, cipher))| {
        let mut errors = Vec::new();
        // One folder per capture: the key file beside it is what both tools read.
        let d = root.join(i.to_string());
        std::fs::create_dir_all(&d).expect("tempdir");
        let mut a = sqos::synth::SynthConfig::new(sqos::synth::Scenario::Steady, d.join("c.pcap"));
        a.duration = Some(10.0);
        a.compress = Some(algo);
        a.chained = chained;
        a.encrypt = cipher;
        a.keys_out = cipher.map(|_| d.join("smb2_seskey_list"));
        sqos::synth::run(&a).expect("synth");
        let what = format!("{algo:?} chained {chained} {cipher:?}");
        let theirs_compressed: usize = tshark_fields(
            &a.output,
            Some("smb2.header.comp_transform.original_size"),
            &["smb2.header.comp_transform.original_size"],
        )
        .iter()
        .map(|r| r[0].split('|').filter(|s| !s.is_empty()).count())
        .sum();
        let (_, r) = run_with(&a.output, keys_beside(&a.output));
        if theirs_compressed as u64 != r.stats.compressed_messages || theirs_compressed < 300 {
            errors.push(format!(
                "{what}: tshark sees {theirs_compressed} compressed messages, sqos {}",
                r.stats.compressed_messages
            ));
        }
        if let Err(e) = compare_counts(&a.output) {
            errors.push(format!("{what}: {e}"));
        }
        let theirs = tshark_sqos(&a.output);
        let ours = ours_sqos(&a.output);
        let compared = theirs.len();
        if theirs != ours || theirs.len() < 200 {
            errors.push(format!(
                "{what}: SQOS fields differ ({} cells from tshark, {} from sqos)",
                theirs.len(),
                ours.len()
            ));
        }
        (compared, errors)
    });
    let compared: usize = per_variant.iter().map(|(n, _)| n).sum();
    let errors: Vec<String> = per_variant.into_iter().flat_map(|(_, e)| e).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    eprintln!("compared {compared} (frame, field) cells inside compressed messages with tshark");
}
