//! The AQL packet ABI of `hsa.h` (HSA 1.2, as ROCr ships it): header bits, the kernel-dispatch and
//! barrier-AND packet layouts, and their 64-byte encodings. Pure data: golden tests pin every field's
//! offset against the header's.

/// Bytes in every AQL packet (and in a queue slot).
pub const PACKET_BYTES: usize = 64;

/// `hsa_packet_type_t`.
pub const PACKET_TYPE_INVALID: u16 = 1;
pub const PACKET_TYPE_KERNEL_DISPATCH: u16 = 2;
pub const PACKET_TYPE_BARRIER_AND: u16 = 3;

/// `hsa_packet_header_t`: the bit offsets of the header's fields.
pub const HEADER_BARRIER: u16 = 8;
pub const HEADER_ACQUIRE_FENCE_SCOPE: u16 = 9;
pub const HEADER_RELEASE_FENCE_SCOPE: u16 = 11;

/// `hsa_kernel_dispatch_packet_t` field offsets (bytes).
pub mod dispatch {
    pub const HEADER: usize = 0;
    pub const SETUP: usize = 2;
    pub const WORKGROUP_SIZE_X: usize = 4;
    pub const WORKGROUP_SIZE_Y: usize = 6;
    pub const WORKGROUP_SIZE_Z: usize = 8;
    pub const RESERVED0: usize = 10;
    pub const GRID_SIZE_X: usize = 12;
    pub const GRID_SIZE_Y: usize = 16;
    pub const GRID_SIZE_Z: usize = 20;
    pub const PRIVATE_SEGMENT_SIZE: usize = 24;
    pub const GROUP_SEGMENT_SIZE: usize = 28;
    pub const KERNEL_OBJECT: usize = 32;
    pub const KERNARG_ADDRESS: usize = 40;
    pub const RESERVED2: usize = 48;
    pub const COMPLETION_SIGNAL: usize = 56;
}

/// `hsa_barrier_and_packet_t` field offsets (bytes).
pub mod barrier_and {
    pub const HEADER: usize = 0;
    pub const RESERVED0: usize = 2;
    pub const RESERVED1: usize = 4;
    pub const DEP_SIGNAL: usize = 8;
    /// How many dependency signals one packet holds.
    pub const DEP_SIGNALS: usize = 5;
    pub const RESERVED2: usize = 48;
    pub const COMPLETION_SIGNAL: usize = 56;
}

/// `hsa_fence_scope_t`: how far a packet's acquire or release fence reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// No fence: the packet relies on other packets' fences.
    None = 0,
    /// Every queue of the same GPU agent.
    Agent = 1,
    /// The whole system: the host and other agents too.
    System = 2,
}

impl Scope {
    pub fn from_bits(bits: u16) -> Option<Scope> {
        match bits {
            0 => Some(Scope::None),
            1 => Some(Scope::Agent),
            2 => Some(Scope::System),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::None => "none",
            Scope::Agent => "agent",
            Scope::System => "system",
        }
    }
    /// One step weaker (system → agent → none); `None` stays `None`.
    pub fn weaker(self) -> Scope {
        match self {
            Scope::System => Scope::Agent,
            _ => Scope::None,
        }
    }
}

/// A packet header: type, barrier bit, acquire and release scopes.
pub fn header(packet_type: u16, barrier: bool, acquire: Scope, release: Scope) -> u16 {
    packet_type | (barrier as u16) << HEADER_BARRIER | (acquire as u16) << HEADER_ACQUIRE_FENCE_SCOPE | (release as u16) << HEADER_RELEASE_FENCE_SCOPE
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub packet_type: u16,
    pub barrier: bool,
    pub acquire: Scope,
    pub release: Scope,
}

/// Decodes a header; `None` for reserved bits set or an unknown scope.
pub fn decode_header(h: u16) -> Option<Header> {
    if h >> 13 != 0 {
        return None;
    }
    Some(Header {
        packet_type: h & 0xFF,
        barrier: h >> HEADER_BARRIER & 1 == 1,
        acquire: Scope::from_bits(h >> HEADER_ACQUIRE_FENCE_SCOPE & 3)?,
        release: Scope::from_bits(h >> HEADER_RELEASE_FENCE_SCOPE & 3)?,
    })
}

/// The fields of a kernel-dispatch packet (all but the header, which is published last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DispatchFields {
    /// Grid dimensions in use (1 to 3).
    pub dimensions: u16,
    pub workgroup_size: [u16; 3],
    /// Grid size in work-items, per dimension.
    pub grid_size: [u32; 3],
    pub private_segment_size: u32,
    pub group_segment_size: u32,
    pub kernel_object: u64,
    pub kernarg_address: u64,
    pub completion_signal: u64,
}

fn put(p: &mut [u8; PACKET_BYTES], at: usize, bytes: &[u8]) {
    p[at..at + bytes.len()].copy_from_slice(bytes);
}

/// A kernel-dispatch packet's 64 bytes.
pub fn encode_dispatch(header: u16, f: &DispatchFields) -> [u8; PACKET_BYTES] {
    use dispatch::*;
    let mut p = [0u8; PACKET_BYTES];
    put(&mut p, HEADER, &header.to_le_bytes());
    put(&mut p, SETUP, &f.dimensions.to_le_bytes());
    put(&mut p, WORKGROUP_SIZE_X, &f.workgroup_size[0].to_le_bytes());
    put(&mut p, WORKGROUP_SIZE_Y, &f.workgroup_size[1].to_le_bytes());
    put(&mut p, WORKGROUP_SIZE_Z, &f.workgroup_size[2].to_le_bytes());
    put(&mut p, GRID_SIZE_X, &f.grid_size[0].to_le_bytes());
    put(&mut p, GRID_SIZE_Y, &f.grid_size[1].to_le_bytes());
    put(&mut p, GRID_SIZE_Z, &f.grid_size[2].to_le_bytes());
    put(&mut p, PRIVATE_SEGMENT_SIZE, &f.private_segment_size.to_le_bytes());
    put(&mut p, GROUP_SEGMENT_SIZE, &f.group_segment_size.to_le_bytes());
    put(&mut p, KERNEL_OBJECT, &f.kernel_object.to_le_bytes());
    put(&mut p, KERNARG_ADDRESS, &f.kernarg_address.to_le_bytes());
    put(&mut p, COMPLETION_SIGNAL, &f.completion_signal.to_le_bytes());
    p
}

/// A barrier-AND packet's 64 bytes: `deps` (at most five signal handles; absent ones are 0, which
/// the packet processor treats as satisfied).
pub fn encode_barrier_and(header: u16, deps: &[u64], completion_signal: u64) -> [u8; PACKET_BYTES] {
    use barrier_and::*;
    let mut p = [0u8; PACKET_BYTES];
    put(&mut p, HEADER, &header.to_le_bytes());
    for (i, d) in deps.iter().take(DEP_SIGNALS).enumerate() {
        put(&mut p, DEP_SIGNAL + 8 * i, &d.to_le_bytes());
    }
    put(&mut p, COMPLETION_SIGNAL, &completion_signal.to_le_bytes());
    p
}

/// Little-endian readers for decoding packets (the simulator's packet processor, tests).
pub fn u16_at(p: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([p[at], p[at + 1]])
}
pub fn u32_at(p: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}
pub fn u64_at(p: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&p[at..at + 8]);
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header values `hsa.h`'s users build (ROCclr, tinygrad): dispatch + barrier + system/system
    /// is 0x1502, agent/agent 0x0B02, barrier-AND + barrier + system/system 0x1503.
    #[test]
    fn golden_headers_match_the_abi() {
        assert_eq!(header(PACKET_TYPE_KERNEL_DISPATCH, true, Scope::System, Scope::System), 0x1502);
        assert_eq!(header(PACKET_TYPE_KERNEL_DISPATCH, true, Scope::Agent, Scope::Agent), 0x0B02);
        assert_eq!(header(PACKET_TYPE_BARRIER_AND, true, Scope::System, Scope::System), 0x1503);
        assert_eq!(header(PACKET_TYPE_BARRIER_AND, false, Scope::None, Scope::None), 0x0003);
        for h in [0x1502u16, 0x0B02, 0x1503, 0x0003, 0x0902] {
            let d = decode_header(h).unwrap();
            assert_eq!(header(d.packet_type, d.barrier, d.acquire, d.release), h);
        }
        assert_eq!(decode_header(0x0602), None, "acquire scope 3 is reserved");
        assert_eq!(decode_header(0x2002), None, "bits 13..15 are reserved");
    }

    #[test]
    fn golden_dispatch_packet_bytes() {
        let f = DispatchFields {
            dimensions: 1,
            workgroup_size: [256, 1, 1],
            grid_size: [512, 1, 1],
            private_segment_size: 0,
            group_segment_size: 16,
            kernel_object: 0x1122_3344_5566_7788,
            kernarg_address: 0x7f00_0000_1000,
            completion_signal: 0xABCD,
        };
        let p = encode_dispatch(0x0B02, &f);
        let hex: String = p.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "020b0100000101000100000000020000010000000100000000000000100000008877665544332211\
             0010000000 7f0000 0000000000000000cdab000000000000"
                .replace(' ', "")
        );
        assert_eq!(u16_at(&p, dispatch::WORKGROUP_SIZE_X), 256);
        assert_eq!(u32_at(&p, dispatch::GRID_SIZE_X), 512);
        assert_eq!(u64_at(&p, dispatch::KERNEL_OBJECT), f.kernel_object);
        assert_eq!(u64_at(&p, dispatch::KERNARG_ADDRESS), f.kernarg_address);
        assert_eq!(u64_at(&p, dispatch::COMPLETION_SIGNAL), 0xABCD);
    }

    #[test]
    fn golden_barrier_and_packet_bytes() {
        let p = encode_barrier_and(header(PACKET_TYPE_BARRIER_AND, true, Scope::None, Scope::System), &[7, 9], 0x55);
        assert_eq!(u16_at(&p, 0), 0x1103);
        assert_eq!((u64_at(&p, 8), u64_at(&p, 16), u64_at(&p, 24), u64_at(&p, 32), u64_at(&p, 40)), (7, 9, 0, 0, 0));
        assert_eq!(u64_at(&p, 48), 0);
        assert_eq!(u64_at(&p, 56), 0x55);
    }

    /// The layout offsets are those `offsetof` gives on `hsa.h`'s structs (a 64-byte packet; the
    /// completion signal last).
    #[test]
    fn offsets_are_hsa_h_offsets() {
        assert_eq!((dispatch::SETUP, dispatch::GRID_SIZE_X, dispatch::PRIVATE_SEGMENT_SIZE, dispatch::GROUP_SEGMENT_SIZE), (2, 12, 24, 28));
        assert_eq!((dispatch::KERNEL_OBJECT, dispatch::KERNARG_ADDRESS, dispatch::RESERVED2, dispatch::COMPLETION_SIGNAL), (32, 40, 48, 56));
        assert_eq!((barrier_and::DEP_SIGNAL, barrier_and::RESERVED2, barrier_and::COMPLETION_SIGNAL), (8, 48, 56));
        assert_eq!(barrier_and::DEP_SIGNAL + 8 * barrier_and::DEP_SIGNALS, barrier_and::RESERVED2);
    }
}
