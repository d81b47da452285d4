/*
 * ProcessPrng, for running the windows_amd64 provider under Wine 8 (Debian 12's), which
 * lacks bcryptprimitives.dll. Rust's standard library draws its random bytes from this
 * function on Windows 10 and newer, where the DLL is part of the system. This stand-in,
 * placed beside the binary only in the test, fills the buffer from RtlGenRandom, the
 * system's generator it replaced, and fails as ProcessPrng would never need to.
 */
#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!RtlGenRandom(data, n)) {
            return FALSE;
        }
        data += n;
        len -= n;
    }
    return TRUE;
}
