#!/usr/bin/env python3
"""Checks that rafter's ISA-specific code stays behind its run-time dispatch.

rafter's libraries hold code for AVX2, AVX-512 and SSE4.1 next to baseline x86-64 code and pick
among them at run time. A CPU without those extensions faults as soon as it executes one of their
instructions outside a dispatched path, and the compiler and linker can put them there silently:
an inline function or template instantiated in a file built for AVX2 is emitted as a weak symbol
in that object, and the linker keeps one copy for the whole program, possibly that one; a static
initializer runs on every CPU. So, for every object in the given static libraries:

  1. no weak or unique (COMDAT) function holds an instruction beyond baseline x86-64;
  2. no static initializer holds one;
  3. a global function that holds one lives in an ISA namespace (avx512::, amx::, avx2::,
     avx2_build::, sse::): the name its dispatching caller picks by CPUID;
  4. no weak or unique symbol names something of an anonymous namespace as GCC mangles it
     (_GLOBAL__N_1): that name is the same in every file, so the linker merges what are different
     things (GCC 12 emits these for function templates instantiated on an anonymous class
     template, seen with the two builds of one kernel file). nvcc names each file's anonymous
     namespace apart (_GLOBAL__N__<hash>_<file>): those are not merged.

"Beyond baseline": VEX/EVEX-encoded instructions (AVX and later: mnemonics starting with "v"),
ymm/zmm/mask/tile registers, AMX's tile instructions, and the SSE3..SSE4.2 mnemonics below. Usage:
    check_dispatch.py [--objdump PATH] LIB.a [LIB.a ...]
Exit 0 when clean, 1 with one line per offending function, 2 on a usage or tool error.
"""
import argparse
import re
import subprocess
import sys

SSE3_TO_SSE42 = set("""
addsubpd addsubps haddpd haddps hsubpd hsubps lddqu movddup movshdup movsldup
pabsb pabsd pabsw palignr phaddd phaddsw phaddw phsubd phsubsw phsubw pmaddubsw pmulhrsw pshufb
psignb psignd psignw
blendpd blendps blendvpd blendvps dppd dpps extractps insertps movntdqa mpsadbw packusdw pblendvb
pblendw pcmpeqq pextrb pextrd pextrq phminposuw pinsrb pinsrd pinsrq pmaxsb pmaxsd pmaxud pmaxuw
pminsb pminsd pminud pminuw pmovsxbd pmovsxbq pmovsxbw pmovsxdq pmovsxwd pmovsxwq pmovzxbd pmovzxbq
pmovzxbw pmovzxdq pmovzxwd pmovzxwq pmuldq pmulld ptest roundpd roundps roundsd roundss
pcmpestri pcmpestrm pcmpistri pcmpistrm pcmpgtq crc32 popcnt
""".split())
# The "v" mnemonics that are not VEX-encoded (segment checks, VMX/SVM) never appear in user code,
# but are named here so that the rule reads exactly.
NOT_VEX = set("verr verw vmcall vmlaunch vmresume vmxoff vmxon vmread vmwrite vmptrld vmptrst vmclear vmfunc "
              "vmrun vmload vmsave vmmcall".split())
ISA_NAMESPACE = re.compile(r"::(avx512|amx|avx2|avx2_build|sse)::")
# AMX (tile) instructions and registers: neither VEX-encoded nor SSE, so named one by one.
AMX = set("ldtilecfg sttilecfg tileloadd tileloaddt1 tilestored tilezero tilerelease tdpbf16ps tdpfp16ps "
          "tdpbssd tdpbsud tdpbusd tdpbuud".split())
SYMBOL = re.compile(r"^[0-9a-f]+ (.{7}) (\S+)\t[0-9a-f]+ (?:\.hidden )?(\S+)$")
MEMBER = re.compile(r"^(\S+):\s+file format ")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")
INSTRUCTION = re.compile(r"^\s+[0-9a-f]+:\t(?:(?:rex\S*|lock|rep\S*|data16|notrack|bnd|cs|ds) )*(\S+)\s*(.*)$")


def beyond_baseline(mnemonic, operands):
    m = mnemonic.split(".")[0]
    if m.startswith("v") and m not in NOT_VEX:
        return True
    if m in SSE3_TO_SSE42 or m in AMX:
        return True
    return re.search(r"%[yz]mm|%k[0-7]\b|%tmm[0-7]", operands) is not None


def scan(objdump, archive):
    """Yields (object, symbol, binding, has_wide_code) for every function in the archive."""
    proc = subprocess.Popen([objdump, "-d", "-t", "-w", "--no-show-raw-insn", archive], stdout=subprocess.PIPE,
                            text=True, errors="replace")
    member, binding, current, wide = None, {}, None, False

    def flush():
        if current is not None:
            base = current[:-5] if current.endswith(".cold") else current
            kind = binding.get(current, "l")
            if kind == "l" and base in binding:  # a cold part belongs to its function
                kind = binding[base]
            return (member, current, kind, wide)
        return None

    for line in proc.stdout:
        line = line.rstrip("\n")
        m = MEMBER.match(line)
        if m:
            done = flush()
            if done:
                yield done
            member, binding, current, wide = m.group(1), {}, None, False
            continue
        m = SYMBOL.match(line)
        if m and m.group(1)[6] == "F":
            flags = m.group(1)
            binding[m.group(3)] = "u" if flags[0] == "u" else "w" if flags[1] == "w" else "g" if flags[0] == "g" else "l"
            continue
        m = FUNCTION.match(line)
        if m:
            done = flush()
            if done:
                yield done
            current, wide = m.group(1), False
            continue
        if current is not None and not wide:
            m = INSTRUCTION.match(line)
            if m and beyond_baseline(m.group(1), m.group(2)):
                wide = True
    done = flush()
    if done:
        yield done
    if proc.wait() != 0:
        raise RuntimeError(f"{objdump} failed on {archive}")


def demangle(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objdump", default="objdump")
    ap.add_argument("archives", nargs="+")
    args = ap.parse_args()
    functions = []
    try:
        for archive in args.archives:
            functions.extend((archive, *f) for f in scan(args.objdump, archive))
    except (OSError, RuntimeError) as e:
        print(f"check_dispatch: {e}", file=sys.stderr)
        return 2
    anonymous = [f for f in functions if f[3] in ("w", "u") and "12_GLOBAL__N_1" in f[2]]
    wide = [f for f in functions if f[4]]
    names = demangle(sorted({f[2] for f in wide + anonymous}))
    bad = [f"{member}: weak symbol of an anonymous namespace (merged across files by the linker): "
           f"{names.get(symbol, symbol)}" for archive, member, symbol, kind, _ in anonymous]
    for archive, member, symbol, kind, _ in wide:
        name = names.get(symbol, symbol)
        if kind in ("w", "u"):
            bad.append(f"{member}: weak function with ISA code (the linker may pick it for every caller): {name}")
        elif symbol.startswith("_GLOBAL__sub_I_") or "__static_initialization_and_destruction" in symbol:
            bad.append(f"{member}: static initializer with ISA code (runs on every CPU): {name}")
        elif kind == "g" and not ISA_NAMESPACE.search(name):
            bad.append(f"{member}: global function with ISA code outside an ISA namespace: {name}")
    print(f"check_dispatch: {len(functions)} functions, {len(wide)} with ISA code, {len(bad)} outside dispatch")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
