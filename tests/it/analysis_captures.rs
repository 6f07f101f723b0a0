//! The analysis on real captures: Samba's smbd rejects every FSCTL_STORAGE_QOS_CONTROL, so no
//! open is ever associated and the only finding is that the server lacks Storage QoS.

use std::path::Path;

use sqos::analysis::{Analysis, Analyzer};
use sqos::pipeline::PipelineConfig;
use sqos::run::run_path;

fn analyze(path: &str) -> Analysis {
    let mut a = Analyzer::default();
    let r = run_path(Path::new(path), PipelineConfig::default(), &mut a);
    assert!(r.is_ok(), "{path}: {:?}", r.err());
    a.finish()
}

#[test]
fn samba_rejects_so_nothing_is_associated() {
    for name in [
        "smb210-plain",
        "smb210-signed",
        "smb302-plain",
        "smb302-signed",
        "smb311-plain",
        "smb311-signed",
    ] {
        let path = format!("captures/real/{name}.pcap");
        assert!(Path::new(&path).exists(), "{path} is committed");
        let a = analyze(&path);
        assert_eq!(a.flows.len(), 1, "{name}");
        let f = &a.flows[0];
        assert_eq!(
            f.id.to_string(),
            "b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e",
            "{name}"
        );
        assert_eq!(
            f.opens.total(),
            0,
            "{name}: no association after a rejected request"
        );
        assert_eq!(f.policy, None, "{name}");
        assert_eq!(f.server, None, "{name}");
        let codes: Vec<&str> = f.findings.iter().map(|x| x.code.as_str()).collect();
        assert_eq!(codes, vec!["flow.server_qos_unsupported"], "{name}");
    }
}

#[test]
fn encrypted_sessions_show_no_flow() {
    for name in ["smb302-encrypted", "smb311-encrypted"] {
        let path = format!("captures/real/{name}.pcap");
        assert!(Path::new(&path).exists(), "{path} is committed");
        assert!(analyze(&path).flows.is_empty(), "{name}");
    }
}
