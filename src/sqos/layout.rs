//! The byte layout of STORAGE_QOS_CONTROL_REQUEST and STORAGE_QOS_CONTROL_RESPONSE, stated once
//! (as smoltcp's `wire` modules do): every field's spec name, key, offset, width, type and the
//! dialect that brought it. The parser reads by these rows, the encoder writes by them, the field
//! tree shows their names, the JSON faces use their keys, and the rules take offsets and
//! lengths from them. Code that looks fields up by name (a display filter, a generated plugin
//! table) reads [`request::FIELDS`], [`request::NAMES`], [`response::FIELDS`] or [`find`].
//!
//! Decision (docs/sqos-codec.md has the full write-up): each field starts where the one before it
//! ends — the layout summed from the field lists of sections 2.2.2.2 / 2.2.2.3, which is also
//! what Microsoft's protocol test suite and Wireshark do. The sizes that follow from it (request
//! fixed part 112 / 128 bytes, response 88 / 96) are written nowhere else. The text's "104"
//! (minimum name offset) and "80" (response size), and the section 4.3 example's order of
//! MaximumBandwidth / BaseIoSize, are kept only to explain findings and server rules.

use std::fmt;
use std::marker::PhantomData;

use nom::bytes::complete::take;
use nom::combinator::map_opt;
use nom::number::complete::{le_u16, le_u32, le_u64};
use nom::{IResult, Parser};
use uuid::Uuid;

use super::field::FieldValue;
use super::{Dialect, Options, ProtocolVersion, Request, Response, Status};

/// How a field's bytes read (integers little-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    U16,
    U32,
    U64,
    /// 16 bytes in Microsoft's mixed-endian GUID order (first three groups little-endian).
    Guid,
    /// ProtocolVersion: a u16 naming the dialect.
    Version,
    /// The request's Options bitmap: a u32.
    Options,
    /// The response's logical flow Status: a u32.
    Status,
    /// UTF-16LE text of the length its length field gives, where its offset field points.
    Utf16,
}

impl Kind {
    /// Bytes on the wire; 0 for text, whose length is in another field.
    pub const fn width(self) -> usize {
        match self {
            Kind::U16 | Kind::Version => 2,
            Kind::U32 | Kind::Options | Kind::Status => 4,
            Kind::U64 => 8,
            Kind::Guid => 16,
            Kind::Utf16 => 0,
        }
    }
}

/// One row of the layout table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldDef {
    /// The spec's name, as the field tree shows it ("LogicalFlowID").
    pub name: &'static str,
    /// snake_case of the name: the key in the JSON and CSV outputs ("logical_flow_id").
    pub key: &'static str,
    /// From the start of the structure.
    pub offset: usize,
    pub kind: Kind,
    /// The first dialect whose structure has the field.
    pub dialect: Dialect,
    /// The spec reserves it: it MUST be 0, and the JSON leaves it out.
    pub reserved: bool,
}

impl FieldDef {
    pub const fn width(&self) -> usize {
        self.kind.width()
    }

    /// The offset of the byte after the field.
    pub const fn end(&self) -> usize {
        self.offset + self.width()
    }

    /// Whether a structure of `dialect` has the field.
    pub const fn in_dialect(&self, dialect: Dialect) -> bool {
        self.dialect as u8 <= dialect as u8
    }
}

/// A value a fixed field holds, read and shown the way its [`Kind`] says.
pub trait WireValue: Copy {
    const KIND: Kind;
    /// nom parser of the value at the start of `input`.
    fn read(input: &[u8]) -> IResult<&[u8], Self>;
    fn value(self) -> FieldValue;
}

/// A [`WireValue`] read by a nom parser and shown as one [`FieldValue`] variant.
macro_rules! wire_value {
    ($t:ty, $kind:ident, $read:expr) => {
        impl WireValue for $t {
            const KIND: Kind = Kind::$kind;
            fn read(input: &[u8]) -> IResult<&[u8], Self> {
                $read.parse(input)
            }
            fn value(self) -> FieldValue {
                FieldValue::$kind(self)
            }
        }
    };
}

wire_value!(u16, U16, le_u16);
wire_value!(u32, U32, le_u32);
wire_value!(u64, U64, le_u64);
wire_value!(
    Uuid,
    Guid,
    map_opt(take(16usize), |b: &[u8]| {
        <[u8; 16]>::try_from(b).ok().map(Uuid::from_bytes_le)
    })
);
wire_value!(ProtocolVersion, Version, le_u16.map(ProtocolVersion));
wire_value!(Options, Options, le_u32.map(Options));
wire_value!(Status, Status, le_u32.map(Status));

/// A row of the table typed by the value it holds, so the parser and the encoder cannot read a
/// field as something else.
pub struct WireField<T> {
    pub def: FieldDef,
    value: PhantomData<fn() -> T>,
}

impl<T> Clone for WireField<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for WireField<T> {}

impl<T> fmt::Debug for WireField<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.def.fmt(f)
    }
}

impl<T: WireValue> WireField<T> {
    /// The first field of a structure.
    const fn first(name: &'static str, key: &'static str) -> Self {
        WireField {
            def: FieldDef {
                name,
                key,
                offset: 0,
                kind: T::KIND,
                dialect: Dialect::V1_0,
                reserved: false,
            },
            value: PhantomData,
        }
    }

    /// The field right after `prev`, in the same dialect.
    const fn after<P>(prev: WireField<P>, name: &'static str, key: &'static str) -> Self {
        WireField {
            def: FieldDef {
                name,
                key,
                offset: prev.def.end(),
                kind: T::KIND,
                dialect: prev.def.dialect,
                reserved: false,
            },
            value: PhantomData,
        }
    }

    const fn reserved(mut self) -> Self {
        self.def.reserved = true;
        self
    }

    const fn since(mut self, dialect: Dialect) -> Self {
        self.def.dialect = dialect;
        self
    }

    pub const fn offset(&self) -> usize {
        self.def.offset
    }

    pub const fn end(&self) -> usize {
        self.def.end()
    }

    /// The row with a value, as the encoder and the JSON face take it.
    pub fn with(&self, v: T) -> (FieldDef, FieldValue) {
        (self.def, v.value())
    }
}

/// A variable-length name of the request: UTF-16LE located by two fixed fields.
#[derive(Clone, Copy, Debug)]
pub struct NameDef {
    /// The spec's name ("InitiatorName").
    pub name: &'static str,
    /// The JSON / CSV key ("initiator_name").
    pub key: &'static str,
    pub offset: WireField<u16>,
    pub length: WireField<u16>,
}

impl NameDef {
    /// The name as a row of the table ([`Kind::Utf16`]; `offset` is that of its offset field).
    pub const fn def(&self) -> FieldDef {
        FieldDef {
            name: self.name,
            key: self.key,
            offset: self.offset.def.offset,
            kind: Kind::Utf16,
            dialect: Dialect::V1_0,
            reserved: false,
        }
    }
}

/// The end of the last field a structure of `dialect` has.
const fn end_of(fields: &[FieldDef], dialect: Dialect) -> usize {
    let mut end = 0;
    let mut i = 0;
    while i < fields.len() {
        let f = &fields[i];
        if f.in_dialect(dialect) && f.end() > end {
            end = f.end();
        }
        i += 1;
    }
    end
}

/// STORAGE_QOS_CONTROL_REQUEST (section 2.2.2.2).
pub mod request {
    use super::*;

    pub const PROTOCOL_VERSION: WireField<ProtocolVersion> =
        WireField::first("ProtocolVersion", "protocol_version");
    pub const RESERVED: WireField<u16> =
        WireField::after(PROTOCOL_VERSION, "Reserved", "reserved").reserved();
    pub const OPTIONS: WireField<Options> = WireField::after(RESERVED, "Options", "options");
    pub const LOGICAL_FLOW_ID: WireField<Uuid> =
        WireField::after(OPTIONS, "LogicalFlowID", "logical_flow_id");
    pub const POLICY_ID: WireField<Uuid> =
        WireField::after(LOGICAL_FLOW_ID, "PolicyID", "policy_id");
    pub const INITIATOR_ID: WireField<Uuid> =
        WireField::after(POLICY_ID, "InitiatorID", "initiator_id");
    pub const LIMIT: WireField<u64> = WireField::after(INITIATOR_ID, "Limit", "limit");
    pub const RESERVATION: WireField<u64> = WireField::after(LIMIT, "Reservation", "reservation");
    pub const INITIATOR_NAME_OFFSET: WireField<u16> =
        WireField::after(RESERVATION, "InitiatorNameOffset", "initiator_name_offset");
    pub const INITIATOR_NAME_LENGTH: WireField<u16> = WireField::after(
        INITIATOR_NAME_OFFSET,
        "InitiatorNameLength",
        "initiator_name_length",
    );
    pub const INITIATOR_NODE_NAME_OFFSET: WireField<u16> = WireField::after(
        INITIATOR_NAME_LENGTH,
        "InitiatorNodeNameOffset",
        "initiator_node_name_offset",
    );
    pub const INITIATOR_NODE_NAME_LENGTH: WireField<u16> = WireField::after(
        INITIATOR_NODE_NAME_OFFSET,
        "InitiatorNodeNameLength",
        "initiator_node_name_length",
    );
    pub const IO_COUNT_INCREMENT: WireField<u64> = WireField::after(
        INITIATOR_NODE_NAME_LENGTH,
        "IoCountIncrement",
        "io_count_increment",
    );
    pub const NORMALIZED_IO_COUNT_INCREMENT: WireField<u64> = WireField::after(
        IO_COUNT_INCREMENT,
        "NormalizedIoCountIncrement",
        "normalized_io_count_increment",
    );
    pub const LATENCY_INCREMENT: WireField<u64> = WireField::after(
        NORMALIZED_IO_COUNT_INCREMENT,
        "LatencyIncrement",
        "latency_increment",
    );
    pub const LOWER_LATENCY_INCREMENT: WireField<u64> = WireField::after(
        LATENCY_INCREMENT,
        "LowerLatencyIncrement",
        "lower_latency_increment",
    );
    pub const BANDWIDTH_LIMIT: WireField<u64> =
        WireField::after(LOWER_LATENCY_INCREMENT, "BandwidthLimit", "bandwidth_limit")
            .since(Dialect::V1_1);
    pub const KILOBYTE_COUNT_INCREMENT: WireField<u64> = WireField::after(
        BANDWIDTH_LIMIT,
        "KilobyteCountIncrement",
        "kilobyte_count_increment",
    );

    /// The fixed fields, in wire order.
    pub const FIELDS: [FieldDef; 18] = [
        PROTOCOL_VERSION.def,
        RESERVED.def,
        OPTIONS.def,
        LOGICAL_FLOW_ID.def,
        POLICY_ID.def,
        INITIATOR_ID.def,
        LIMIT.def,
        RESERVATION.def,
        INITIATOR_NAME_OFFSET.def,
        INITIATOR_NAME_LENGTH.def,
        INITIATOR_NODE_NAME_OFFSET.def,
        INITIATOR_NODE_NAME_LENGTH.def,
        IO_COUNT_INCREMENT.def,
        NORMALIZED_IO_COUNT_INCREMENT.def,
        LATENCY_INCREMENT.def,
        LOWER_LATENCY_INCREMENT.def,
        BANDWIDTH_LIMIT.def,
        KILOBYTE_COUNT_INCREMENT.def,
    ];

    pub const INITIATOR_NAME: NameDef = NameDef {
        name: "InitiatorName",
        key: "initiator_name",
        offset: INITIATOR_NAME_OFFSET,
        length: INITIATOR_NAME_LENGTH,
    };
    pub const INITIATOR_NODE_NAME: NameDef = NameDef {
        name: "InitiatorNodeName",
        key: "initiator_node_name",
        offset: INITIATOR_NODE_NAME_OFFSET,
        length: INITIATOR_NODE_NAME_LENGTH,
    };
    /// The names after the fixed part, in the order `Request::with_names` places them.
    pub const NAMES: [NameDef; 2] = [INITIATOR_NAME, INITIATOR_NODE_NAME];

    /// Bytes of the fixed part of a `dialect` request.
    pub const fn fixed_len(dialect: Dialect) -> usize {
        end_of(&FIELDS, dialect)
    }
}

/// STORAGE_QOS_CONTROL_RESPONSE (section 2.2.2.3).
pub mod response {
    use super::*;

    pub const PROTOCOL_VERSION: WireField<ProtocolVersion> =
        WireField::first("ProtocolVersion", "protocol_version");
    pub const RESERVED: WireField<u16> =
        WireField::after(PROTOCOL_VERSION, "Reserved", "reserved").reserved();
    /// No flags are defined for the response; it MUST be 0 (a finding says when not).
    pub const OPTIONS: WireField<u32> = WireField::after(RESERVED, "Options", "options");
    pub const LOGICAL_FLOW_ID: WireField<Uuid> =
        WireField::after(OPTIONS, "LogicalFlowID", "logical_flow_id");
    pub const POLICY_ID: WireField<Uuid> =
        WireField::after(LOGICAL_FLOW_ID, "PolicyID", "policy_id");
    pub const INITIATOR_ID: WireField<Uuid> =
        WireField::after(POLICY_ID, "InitiatorID", "initiator_id");
    pub const TIME_TO_LIVE: WireField<u32> =
        WireField::after(INITIATOR_ID, "TimeToLive", "time_to_live");
    pub const STATUS: WireField<Status> = WireField::after(TIME_TO_LIVE, "Status", "status");
    pub const MAXIMUM_IO_RATE: WireField<u64> =
        WireField::after(STATUS, "MaximumIoRate", "maximum_io_rate");
    pub const MINIMUM_IO_RATE: WireField<u64> =
        WireField::after(MAXIMUM_IO_RATE, "MinimumIoRate", "minimum_io_rate");
    pub const BASE_IO_SIZE: WireField<u32> =
        WireField::after(MINIMUM_IO_RATE, "BaseIoSize", "base_io_size");
    pub const RESERVED2: WireField<u32> =
        WireField::after(BASE_IO_SIZE, "Reserved2", "reserved2").reserved();
    /// Dialect 1.1 only, at the end (structure layout; the section 4.3 example has it after
    /// MinimumIoRate instead).
    pub const MAXIMUM_BANDWIDTH: WireField<u64> =
        WireField::after(RESERVED2, "MaximumBandwidth", "maximum_bandwidth").since(Dialect::V1_1);

    /// The fields, in wire order.
    pub const FIELDS: [FieldDef; 13] = [
        PROTOCOL_VERSION.def,
        RESERVED.def,
        OPTIONS.def,
        LOGICAL_FLOW_ID.def,
        POLICY_ID.def,
        INITIATOR_ID.def,
        TIME_TO_LIVE.def,
        STATUS.def,
        MAXIMUM_IO_RATE.def,
        MINIMUM_IO_RATE.def,
        BASE_IO_SIZE.def,
        RESERVED2.def,
        MAXIMUM_BANDWIDTH.def,
    ];

    /// Bytes of a `dialect` response.
    pub const fn len(dialect: Dialect) -> usize {
        end_of(&FIELDS, dialect)
    }
}

/// Every row with this key: the request's fixed fields and names, then the response's fields.
pub fn find(key: &str) -> impl Iterator<Item = FieldDef> + '_ {
    let names = request::NAMES.map(|n| n.def());
    request::FIELDS
        .into_iter()
        .chain(names)
        .chain(response::FIELDS)
        .filter(move |f| f.key == key)
}

impl Dialect {
    /// Size of the fixed part of STORAGE_QOS_CONTROL_REQUEST, summed from the field list.
    pub const fn request_fixed_len(self) -> usize {
        request::fixed_len(self)
    }

    /// Size of STORAGE_QOS_CONTROL_RESPONSE, summed from the field list.
    pub const fn response_len(self) -> usize {
        response::len(self)
    }
}

impl Request {
    /// Every fixed field with its value, in wire order; the 1.1 fields when `v1_1` is present.
    pub fn wire_fields(&self) -> Vec<(FieldDef, FieldValue)> {
        use request as q;
        let mut v = vec![
            q::PROTOCOL_VERSION.with(self.protocol_version),
            q::RESERVED.with(self.reserved),
            q::OPTIONS.with(self.options),
            q::LOGICAL_FLOW_ID.with(self.logical_flow_id),
            q::POLICY_ID.with(self.policy_id),
            q::INITIATOR_ID.with(self.initiator_id),
            q::LIMIT.with(self.limit),
            q::RESERVATION.with(self.reservation),
            q::INITIATOR_NAME_OFFSET.with(self.initiator_name_offset),
            q::INITIATOR_NAME_LENGTH.with(self.initiator_name_length),
            q::INITIATOR_NODE_NAME_OFFSET.with(self.initiator_node_name_offset),
            q::INITIATOR_NODE_NAME_LENGTH.with(self.initiator_node_name_length),
            q::IO_COUNT_INCREMENT.with(self.io_count_increment),
            q::NORMALIZED_IO_COUNT_INCREMENT.with(self.normalized_io_count_increment),
            q::LATENCY_INCREMENT.with(self.latency_increment),
            q::LOWER_LATENCY_INCREMENT.with(self.lower_latency_increment),
        ];
        if let Some(x) = self.v1_1 {
            v.push(q::BANDWIDTH_LIMIT.with(x.bandwidth_limit));
            v.push(q::KILOBYTE_COUNT_INCREMENT.with(x.kilobyte_count_increment));
        }
        v
    }
}

impl Response {
    /// Every field with its value, in wire order; MaximumBandwidth when present.
    pub fn wire_fields(&self) -> Vec<(FieldDef, FieldValue)> {
        use response as r;
        let mut v = vec![
            r::PROTOCOL_VERSION.with(self.protocol_version),
            r::RESERVED.with(self.reserved),
            r::OPTIONS.with(self.options),
            r::LOGICAL_FLOW_ID.with(self.logical_flow_id),
            r::POLICY_ID.with(self.policy_id),
            r::INITIATOR_ID.with(self.initiator_id),
            r::TIME_TO_LIVE.with(self.time_to_live),
            r::STATUS.with(self.status),
            r::MAXIMUM_IO_RATE.with(self.maximum_io_rate),
            r::MINIMUM_IO_RATE.with(self.minimum_io_rate),
            r::BASE_IO_SIZE.with(self.base_io_size),
            r::RESERVED2.with(self.reserved2),
        ];
        if let Some(bw) = self.maximum_bandwidth {
            v.push(r::MAXIMUM_BANDWIDTH.with(bw));
        }
        v
    }
}

/// The spec text's minimum InitiatorName/InitiatorNodeName offset (section 3.2.5.1.2), which is
/// inside the 112/128-byte fixed part (where LowerLatencyIncrement starts). Used in finding
/// messages and by the server rules, which follow the text.
pub const SPEC_TEXT_MIN_NAME_OFFSET: usize = 104;

/// The spec text's "size of STORAGE_QOS_CONTROL_RESPONSE" (sections 3.1.4.1, 3.2.5.1.4), smaller
/// than either real response. Used in finding messages and by the server rules.
pub const SPEC_TEXT_RESPONSE_SIZE: usize = 80;

/// Limit on Limit / Reservation / BandwidthLimit from product note <8> (<4> in revision 1.0).
pub const MAX_POLICY_PARAMETER: u64 = 1_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes docs/sqos-codec.md and the README state, summed from the field lists.
    #[test]
    fn sizes_are_the_summed_field_lists() {
        assert_eq!(request::fixed_len(Dialect::V1_0), 112);
        assert_eq!(request::fixed_len(Dialect::V1_1), 128);
        assert_eq!(response::len(Dialect::V1_0), 88);
        assert_eq!(response::len(Dialect::V1_1), 96);
        assert_eq!(request::BANDWIDTH_LIMIT.offset(), 112);
        assert_eq!(request::KILOBYTE_COUNT_INCREMENT.offset(), 120);
        assert_eq!(request::LOWER_LATENCY_INCREMENT.offset(), 104);
        assert_eq!(response::BASE_IO_SIZE.offset(), 80);
        assert_eq!(response::RESERVED2.offset(), 84);
        assert_eq!(response::MAXIMUM_BANDWIDTH.offset(), 88);
        assert_eq!(request::RESERVED.offset(), 2);
    }

    #[test]
    fn rows_tile_the_structures_without_gaps() {
        for fields in [&request::FIELDS[..], &response::FIELDS[..]] {
            assert_eq!(fields[0].offset, 0);
            for pair in fields.windows(2) {
                assert_eq!(pair[0].end(), pair[1].offset, "{:?}", pair[1]);
                assert!(pair[0].dialect <= pair[1].dialect);
            }
        }
    }

    #[test]
    fn find_by_key() {
        let rows: Vec<FieldDef> = find("logical_flow_id").collect();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|f| f.offset == 8 && f.kind == Kind::Guid));
        let name: Vec<FieldDef> = find("initiator_node_name").collect();
        assert_eq!(name.len(), 1);
        assert_eq!(
            (name[0].name, name[0].kind),
            ("InitiatorNodeName", Kind::Utf16)
        );
        assert_eq!(
            find("maximum_bandwidth").next().map(|f| f.dialect),
            Some(Dialect::V1_1)
        );
        assert_eq!(find("nope").count(), 0);
    }

    #[test]
    fn wire_fields_follow_the_table() {
        let req = Request::new(Dialect::V1_1);
        let defs: Vec<FieldDef> = req.wire_fields().into_iter().map(|(d, _)| d).collect();
        assert_eq!(defs, request::FIELDS);
        let defs: Vec<FieldDef> = Request::new(Dialect::V1_0)
            .wire_fields()
            .into_iter()
            .map(|(d, _)| d)
            .collect();
        assert_eq!(defs, request::FIELDS[..16]);
        let resp = Response::new(Dialect::V1_1);
        let defs: Vec<FieldDef> = resp.wire_fields().into_iter().map(|(d, _)| d).collect();
        assert_eq!(defs, response::FIELDS);
    }

    #[test]
    fn guid_is_mixed_endian() {
        let wire = [
            0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D,
            0x69, 0x6E, 0xFF,
        ];
        let (rest, g) = Uuid::read(&wire).unwrap();
        assert_eq!(g.to_string(), "b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e");
        assert_eq!(rest, &[0xFF]);
        assert!(Uuid::read(&wire[..15]).is_err());
    }
}
