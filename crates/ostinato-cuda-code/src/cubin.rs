//! What a cubin (a CUDA ELF) says of an entry's params, read from the ELF itself: the
//! `.nv.info.<entry>` section holds the entry's attributes, one `EIATTR_KPARAM_INFO` per param
//! (ordinal, offset in the param bank, size). The CUDA backend takes a kernel's param count from here
//! (or from the PTX `.entry` list) so that it never asks the driver about a param past the last one
//! (`cuFuncGetParamInfo` answers such a probe with `CUDA_ERROR_INVALID_VALUE`, which
//! compute-sanitizer reports as an error at every bind).
//!
//! The attribute encoding is the toolkit's (`cuobjdump -elf` prints it): each attribute starts with a
//! format byte and an attribute byte; `EIFMT_SVAL` (4) is followed by a little-endian u16 byte count
//! and that many bytes, `EIFMT_HVAL` (3) by a u16 value, `EIFMT_BVAL` (2) by a byte and a pad byte,
//! `EIFMT_NVAL` (1) by two zero bytes. A `KPARAM_INFO` value is 12 bytes: u32 index, u16 ordinal,
//! u16 offset, u32 whose bits 18..32 are the size in bytes. The ELF container is read with the
//! `object` crate.

use object::{Object, ObjectSection};

/// `EIATTR_KPARAM_INFO`.
const KPARAM_INFO: u8 = 0x17;
/// Attribute formats.
const EIFMT_NVAL: u8 = 1;
const EIFMT_BVAL: u8 = 2;
const EIFMT_HVAL: u8 = 3;
const EIFMT_SVAL: u8 = 4;

/// One param of an entry, as its cubin declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// Its position in the entry's param list (0-based).
    pub ordinal: u16,
    /// Its byte offset in the param bank.
    pub offset: u16,
    /// Its size in bytes.
    pub size: u32,
}

/// The params of `entry` in `cubin`, by ordinal, or why they cannot be read (not an ELF, no such
/// entry's `.nv.info` section, an attribute cut short, ordinals that are not 0..n).
pub fn entry_params(cubin: &[u8], entry: &str) -> Result<Vec<ParamInfo>, String> {
    let file = object::File::parse(cubin).map_err(|e| format!("not a cubin (ELF): {e}"))?;
    let name = format!(".nv.info.{entry}");
    let section = file.section_by_name(&name).ok_or_else(|| format!("the cubin has no `{name}` section"))?;
    let data = section.data().map_err(|e| format!("`{name}`: {e}"))?;
    let mut params = attribute_params(data).map_err(|e| format!("`{name}`: {e}"))?;
    params.sort_by_key(|p| p.ordinal);
    if let Some((i, p)) = params.iter().enumerate().find(|(i, p)| usize::from(p.ordinal) != *i) {
        return Err(format!("`{name}`: param ordinals are not 0..{}: ordinal {} where {i} belongs", params.len(), p.ordinal));
    }
    Ok(params)
}

/// The `KPARAM_INFO` values of one `.nv.info.<entry>` section's attributes, in section order.
fn attribute_params(data: &[u8]) -> Result<Vec<ParamInfo>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let header = data.get(at..at + 4).ok_or_else(|| format!("an attribute header at byte {at} is cut short"))?;
        let (format, attribute, word) = (header[0], header[1], u16::from_le_bytes([header[2], header[3]]));
        at += 4;
        match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => {}
            EIFMT_SVAL => {
                let len = usize::from(word);
                let value = data.get(at..at + len).ok_or_else(|| format!("attribute {attribute:#x} at byte {} claims {len} bytes", at - 4))?;
                if attribute == KPARAM_INFO {
                    if value.len() < 12 {
                        return Err(format!("a param attribute of {} bytes (12 expected)", value.len()));
                    }
                    let u16_at = |i: usize| u16::from_le_bytes([value[i], value[i + 1]]);
                    let flags = u32::from_le_bytes([value[8], value[9], value[10], value[11]]);
                    out.push(ParamInfo { ordinal: u16_at(4), offset: u16_at(6), size: flags >> 18 });
                }
                at += len;
            }
            other => return Err(format!("attribute format {other:#x} at byte {} is none the toolkit writes", at - 4)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `.nv.info.<entry>` section as ptxas 13.0 wrote it for
    /// `k3(.param .u64 a, .param .u32 b, .param .align 8 .b8 s[24], .param .u16 c)` (`cuobjdump -elf`
    /// decodes it as four KPARAM_INFO attributes, last param first, among others of every format).
    const K3_INFO: &str = "043704008200000004170c00000000000300280000f0090004170c00000000000200100000f0610004170c00000000000100080000f0110004170c00000000000000000000f0210003500000031bff00035f0101041c04001000000003192a00040a08000c00000010022a000436040008000000";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn the_param_attributes_give_each_params_ordinal_offset_and_size() {
        let mut p = attribute_params(&hex(K3_INFO)).unwrap();
        p.sort_by_key(|p| p.ordinal);
        let got: Vec<(u16, u16, u32)> = p.iter().map(|p| (p.ordinal, p.offset, p.size)).collect();
        assert_eq!(got, vec![(0, 0, 8), (1, 8, 4), (2, 0x10, 24), (3, 0x28, 2)]);
    }

    #[test]
    fn a_cut_short_or_unknown_attribute_is_an_error_not_a_guess() {
        let full = hex(K3_INFO);
        let e = attribute_params(&full[..full.len() - 3]).unwrap_err();
        assert!(e.contains("cut short") || e.contains("claims"), "{e}");
        let e = attribute_params(&[9, 0x17, 0, 0]).unwrap_err();
        assert!(e.contains("format 0x9"), "{e}");
        assert!(entry_params(b"not an elf", "k").unwrap_err().contains("not a cubin"));
    }

    /// A real cubin assembled here by the toolkit's `ptxas` (skips where it is not installed): each
    /// entry's params, a param-less entry's none, an unknown entry refused.
    #[test]
    fn a_cubin_assembled_by_ptxas_gives_every_entrys_params() {
        let ptxas = std::env::var_os("OSTINATO_PTXAS").map(std::path::PathBuf::from).unwrap_or_else(|| "/opt/nv/nvidia/cu13/bin/ptxas".into());
        if !ptxas.is_file() {
            eprintln!("SKIP a_cubin_assembled_by_ptxas_gives_every_entrys_params: no ptxas at {} (set OSTINATO_PTXAS)", ptxas.display());
            return;
        }
        let dir = std::env::temp_dir().join(format!("ostinato-cubin-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\
                   .visible .entry k3(.param .u64 a, .param .u32 b, .param .align 8 .b8 s[24], .param .u16 c)\n{\n ret;\n}\n\
                   .visible .entry k0()\n{\n ret;\n}\n";
        std::fs::write(dir.join("k.ptx"), ptx).unwrap();
        let ok = std::process::Command::new(&ptxas).arg("-arch=sm_90").arg(dir.join("k.ptx")).arg("-o").arg(dir.join("k.cubin")).status().unwrap();
        assert!(ok.success());
        let cubin = std::fs::read(dir.join("k.cubin")).unwrap();
        let sizes: Vec<u32> = entry_params(&cubin, "k3").unwrap().iter().map(|p| p.size).collect();
        assert_eq!(sizes, vec![8, 4, 24, 2]);
        assert_eq!(entry_params(&cubin, "k0").unwrap(), vec![]);
        assert!(entry_params(&cubin, "missing").unwrap_err().contains(".nv.info.missing"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
