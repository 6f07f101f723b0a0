//! The pure SMB2 parsers: header, bodies, NBSS header, names; typed errors on bad input.

use crate::smb2_build::*;
use sqos::smb2::body::*;
use sqos::smb2::netbios::{parse_nbss_header, plausible_message_start, NbssType};
use sqos::smb2::{parse_body, parse_header, Body, Command, FileId, NtStatus, Smb2Error};

const FID: FileId = FileId {
    persistent: 0x0102,
    volatile: 0x0304,
};

#[test]
fn header_fields() {
    let m = Msg {
        credits: 31,
        ..Msg::response(IOCTL, 0x0012_3456_789A, 0xC000_000D, error_response())
    };
    let h = parse_header(&m.bytes(0)).unwrap();
    assert_eq!(h.command, Command::IOCTL);
    assert_eq!(h.message_id, 0x0012_3456_789A);
    assert_eq!(h.status, NtStatus::INVALID_PARAMETER);
    assert_eq!(h.credits, 31);
    assert_eq!(h.credit_charge, 1);
    assert!(h.is_response() && !h.flags.is_async() && !h.is_interim());
    assert_eq!(h.tree_id(), Some(5));
    assert_eq!(h.session_id, 0x1122_3344_5566_7788);
}

#[test]
fn header_errors_are_typed() {
    let b = Msg::request(ECHO, 1, echo()).bytes(0);
    assert_eq!(
        parse_header(&b[..63]),
        Err(Smb2Error::Truncated {
            what: "SMB2 header",
            needed: 64,
            available: 63
        })
    );
    let mut bad = b.clone();
    bad[4] = 65;
    // Kept (NBSS framing is trusted, as Wireshark does), and reported on request.
    let h = parse_header(&bad).unwrap();
    assert_eq!(h.structure_size, 65);
    assert_eq!(
        h.check_structure_size(),
        Err(Smb2Error::StructureSize {
            what: "SMB2 header",
            expected: 64,
            found: 65
        })
    );
    let mut smb1 = b;
    smb1[0] = 0xFF;
    assert_eq!(
        parse_header(&smb1),
        Err(Smb2Error::UnknownProtocol([0xFF, b'S', b'M', b'B']))
    );
}

#[test]
fn ioctl_offsets_are_honoured() {
    let input = [0xA1, 0xA2, 0xA3, 0xA4, 0xA5];
    let part = Msg::request(
        IOCTL,
        1,
        ioctl_request(FSCTL_SQOS, fid(0x0102, 0x0304), &input, 88, 24),
    )
    .bytes(0);
    let req = parse_ioctl_request(&part).unwrap();
    assert_eq!(req.ctl_code, 0x0009_0350);
    assert_eq!(req.file_id, FID);
    assert_eq!(req.input_offset, 64 + 56 + 24);
    assert_eq!(req.input_count, 5);
    assert_eq!(req.max_output_response, 88);
    assert_eq!(req.flags, IOCTL_IS_FSCTL);
    let loc = req.input(&part);
    assert_eq!(loc.bytes, &input);
    assert!(!loc.is_truncated());
    // Cut short: the available prefix and the number of missing bytes.
    let loc = req.input(&part[..part.len() - 2]);
    assert_eq!(loc.bytes, &input[..3]);
    assert_eq!(loc.missing, 2);

    let out = [1, 2, 3, 4, 5, 6, 7, 8];
    let part = Msg::response(
        IOCTL,
        1,
        0,
        ioctl_response(FSCTL_SQOS, fid(0x0102, 0x0304), &out, 40),
    )
    .bytes(0);
    let resp = parse_ioctl_response(&part).unwrap();
    assert_eq!(resp.output_offset, 64 + 48 + 40);
    assert_eq!(resp.output_count, 8);
    assert_eq!(resp.output(&part).bytes, &out);
    // Offsets pointing past the part: nothing there, all missing, no panic.
    let mut weird = part.clone();
    weird[64 + 32..64 + 36].copy_from_slice(&u32::MAX.to_le_bytes());
    let resp = parse_ioctl_response(&weird).unwrap();
    assert_eq!(resp.output(&weird).bytes, &[] as &[u8]);
    assert_eq!(resp.output(&weird).missing, 8);
}

#[test]
fn create_close_read_write_bodies() {
    let part = Msg::request(CREATE, 1, create_request("dir\\ünï.vhdx")).bytes(0);
    let c = parse_create_request(&part).unwrap();
    assert_eq!(c.name.as_deref(), Some("dir\\ünï.vhdx"));
    assert_eq!(c.name_offset, 120);
    assert_eq!(c.name_length, 24);
    // The name cut off: no name, but the fixed part decodes.
    assert_eq!(parse_create_request(&part[..130]).unwrap().name, None);

    let part = Msg::response(CREATE, 1, 0, create_response(fid(0x0102, 0x0304))).bytes(0);
    let r = parse_create_response(&part).unwrap();
    assert_eq!(r.file_id, FID);
    assert_eq!(r.end_of_file, 4096);
    assert_eq!(r.create_action, 1);

    let part = Msg::request(CLOSE, 1, close_request(fid(0x0102, 0x0304))).bytes(0);
    assert_eq!(parse_close_request(&part).unwrap().file_id, FID);
    let part = Msg::response(CLOSE, 1, 0, close_response()).bytes(0);
    assert_eq!(parse_close_response(&part).unwrap().flags, 0);

    let part = Msg::request(READ, 1, read_request(fid(0x0102, 0x0304), 65536, 1 << 40)).bytes(0);
    let r = parse_read_request(&part).unwrap();
    assert_eq!((r.length, r.offset, r.file_id), (65536, 1 << 40, FID));
    let part = Msg::response(READ, 1, 0, read_response(100, 0)).bytes(0);
    assert_eq!(parse_read_response(&part[..80]).unwrap().data_length, 100);

    let part = Msg::request(WRITE, 1, write_request(fid(0x0102, 0x0304), 512, 0)).bytes(0);
    let w = parse_write_request(&part[..112]).unwrap();
    assert_eq!((w.length, w.data_offset, w.file_id), (512, 112, FID));
    let part = Msg::response(WRITE, 1, 0, write_response(512)).bytes(0);
    assert_eq!(parse_write_response(&part).unwrap().count, 512);
}

#[test]
fn error_body_for_any_command_and_wrong_sizes_rejected() {
    let part = Msg::response(CREATE, 1, 0xC000_0034, error_response()).bytes(0);
    let h = parse_header(&part).unwrap();
    assert!(matches!(
        parse_body(&h, &part),
        Ok(Body::Error(ErrorResponse { byte_count: 0, .. }))
    ));
    // A CLOSE request whose StructureSize says 25.
    let mut part = Msg::request(CLOSE, 1, close_request(fid(1, 1))).bytes(0);
    part[64] = 25;
    assert_eq!(
        parse_close_request(&part),
        Err(Smb2Error::StructureSize {
            what: "CLOSE request",
            expected: 24,
            found: 25
        })
    );
    assert!(matches!(
        parse_ioctl_request(&part[..70]),
        Err(Smb2Error::Truncated {
            what: "IOCTL request",
            ..
        })
    ));
}

#[test]
fn names() {
    assert_eq!(Command::QUERY_DIRECTORY.to_string(), "QUERY_DIRECTORY");
    assert_eq!(Command(0x12).to_string(), "OPLOCK_BREAK");
    assert_eq!(Command(0x99).to_string(), "UNKNOWN_0x0099");
    assert_eq!(NtStatus(0xC000_0225).to_string(), "STATUS_NOT_FOUND");
    assert_eq!(
        NtStatus(0xC000_0059).to_string(),
        "STATUS_REVISION_MISMATCH"
    );
    assert_eq!(
        NtStatus(0xC000_0010).to_string(),
        "STATUS_INVALID_DEVICE_REQUEST"
    );
    assert_eq!(NtStatus(0xC000_00BB).to_string(), "STATUS_NOT_SUPPORTED");
    assert_eq!(
        NtStatus(0xC000_0016).to_string(),
        "STATUS_MORE_PROCESSING_REQUIRED"
    );
    assert_eq!(NtStatus(0x1234).to_string(), "0x00001234");
    assert!(NtStatus::ACCESS_DENIED.is_error());
    assert!(!NtStatus::BUFFER_OVERFLOW.is_error());
}

#[test]
fn nbss_header_and_plausibility() {
    assert_eq!(
        parse_nbss_header([0, 1, 2, 3]).map(|h| (h.kind, h.length)),
        Some((NbssType::SessionMessage, 0x010203))
    );
    assert_eq!(
        parse_nbss_header([0x85, 0, 0, 0]).map(|h| h.kind),
        Some(NbssType::KeepAlive)
    );
    assert_eq!(parse_nbss_header([0x42, 0, 0, 0]), None);
    let good = framed(&Msg::request(ECHO, 1, echo()));
    assert!(plausible_message_start(&good));
    assert!(!plausible_message_start(&good[..27]));
    let mut bad_cmd = good.clone();
    bad_cmd[16] = 0x40;
    assert!(!plausible_message_start(&bad_cmd));
    let mut too_long = good;
    too_long[1] = 0xFF;
    assert!(!plausible_message_start(&too_long));
}
