//! What a release binary is, read from its bytes: the ELF, Mach-O and PE headers the release
//! tests check, since not every platform's binary can run here.

/// The ELF header's machine field, after checking that `bytes` is a 64-bit little-endian ELF.
pub fn elf_machine(bytes: &[u8]) -> u16 {
    assert!(
        bytes.len() > 20 && bytes[..4] == *b"\x7fELF",
        "not an ELF file"
    );
    assert_eq!(bytes[4], 2, "not a 64-bit ELF (EI_CLASS {})", bytes[4]);
    assert_eq!(
        bytes[5], 1,
        "not a little-endian ELF (EI_DATA {})",
        bytes[5]
    );
    u16::from_le_bytes([bytes[18], bytes[19]])
}

/// Mach-O `cputype` of x86-64.
pub const CPU_TYPE_X86_64: u32 = 0x0100_0007;
/// Mach-O `cputype` of arm64.
pub const CPU_TYPE_ARM64: u32 = 0x0100_000C;

/// Load commands that name a dylib the binary needs (plain, weak, re-exported, lazy, upward).
const DYLIB_COMMANDS: [u32; 5] = [0xC, 0x8000_0018, 0x8000_001F, 0x20, 0x8000_0023];

/// `LC_MAIN`: the entry point of an executable.
const LC_MAIN: u32 = 0x8000_0028;

/// What the structure of a 64-bit Mach-O executable says.
#[derive(Debug)]
pub struct MachO {
    /// `cputype`.
    pub cpu_type: u32,
    /// The dylibs it loads, by path.
    pub dylibs: Vec<String>,
    /// Whether it has an entry point (`LC_MAIN`).
    pub has_entry_point: bool,
}

/// Reads a 64-bit little-endian Mach-O executable's header and load commands.
pub fn mach_o(bytes: &[u8]) -> MachO {
    let u32_at = |at: usize| -> u32 {
        let b: [u8; 4] = bytes
            .get(at..at + 4)
            .and_then(|s| s.try_into().ok())
            .unwrap_or_else(|| panic!("the Mach-O ends inside its header at {at}"));
        u32::from_le_bytes(b)
    };
    assert_eq!(u32_at(0), 0xFEED_FACF, "not a 64-bit little-endian Mach-O");
    assert_eq!(u32_at(12), 2, "not an executable (MH_EXECUTE)");
    let commands = u32_at(16);
    let mut at = 32;
    let mut m = MachO {
        cpu_type: u32_at(4),
        dylibs: Vec::new(),
        has_entry_point: false,
    };
    for _ in 0..commands {
        let (cmd, size) = (u32_at(at), u32_at(at + 4) as usize);
        if DYLIB_COMMANDS.contains(&cmd) {
            let name_at = at + u32_at(at + 8) as usize;
            let name = &bytes[name_at..at + size];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            m.dylibs
                .push(String::from_utf8_lossy(&name[..end]).into_owned());
        }
        m.has_entry_point |= cmd == LC_MAIN;
        at += size;
    }
    m
}

/// PE `Machine` of x86-64.
pub const IMAGE_FILE_MACHINE_AMD64: u16 = 0x8664;

/// The `Machine` of a PE32+ image (a 64-bit Windows executable), after checking its headers.
pub fn pe_machine(bytes: &[u8]) -> u16 {
    assert!(
        bytes.starts_with(b"MZ"),
        "not a Windows executable (no MZ header)"
    );
    let at = bytes
        .get(0x3C..0x40)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .expect("a DOS header");
    assert_eq!(
        bytes.get(at..at + 4),
        Some(&b"PE\0\0"[..]),
        "no PE signature at {at:#x}"
    );
    // The optional header follows the 20-byte file header; PE32+ is magic 0x20B.
    let magic = bytes
        .get(at + 24..at + 26)
        .map(|b| u16::from_le_bytes([b[0], b[1]]));
    assert_eq!(magic, Some(0x20B), "not a PE32+ (64-bit) image");
    u16::from_le_bytes([bytes[at + 4], bytes[at + 5]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mach_o_headers_and_dylibs_are_read() {
        // A header for arm64 with two load commands: a dylib and LC_MAIN.
        let mut b = Vec::new();
        for v in [0xFEED_FACF_u32, CPU_TYPE_ARM64, 0, 2, 2, 0, 0, 0] {
            b.extend(v.to_le_bytes());
        }
        let name = b"/usr/lib/libSystem.B.dylib\0\0\0\0\0\0";
        for v in [0xC_u32, 24 + name.len() as u32, 24, 0, 0, 0] {
            b.extend(v.to_le_bytes());
        }
        b.extend(name);
        for v in [LC_MAIN, 24, 0, 0, 0, 0] {
            b.extend(v.to_le_bytes());
        }
        let m = mach_o(&b);
        assert_eq!(m.cpu_type, CPU_TYPE_ARM64);
        assert_eq!(m.dylibs, ["/usr/lib/libSystem.B.dylib"]);
        assert!(m.has_entry_point);
    }

    #[test]
    fn a_pe32_plus_header_is_read() {
        let mut b = vec![0u8; 0x80];
        b[..2].copy_from_slice(b"MZ");
        b[0x3C] = 0x40;
        b[0x40..0x44].copy_from_slice(b"PE\0\0");
        b[0x44..0x46].copy_from_slice(&IMAGE_FILE_MACHINE_AMD64.to_le_bytes());
        b[0x58..0x5A].copy_from_slice(&0x20B_u16.to_le_bytes());
        assert_eq!(pe_machine(&b), IMAGE_FILE_MACHINE_AMD64);
    }
}
