# SPDX-License-Identifier: Apache-2.0
# Shared by cmake/abi/check_abi.sh (the ctest abi.baseline) and cmake/abi/update_baseline.sh;
# sourced, not run. docs/abi.md ("The checked baseline") explains what they check and why.
#
# cmake/abi/<major>.<minor>/backplane/c_api.h   the header of every frozen minor
# cmake/abi/<major>.<minor>/libbackplane.abi    abidw's description of libbackplane at that minor
#                                               (from 1.5, the first baseline, on)
# cmake/abi/describe.abignore                   what the description keeps

# The version a c_api.h declares: "MAJOR.MINOR".
abi_header_version() {
  awk '/^#define BP_ABI_VERSION_MAJOR /{M=$3} /^#define BP_ABI_VERSION_MINOR /{m=$3}
       END{print M "." m}' "$1"
}

# The versions under cmake/abi that have a library description, oldest first.
abi_baselines() {
  local f
  for f in "$1"/*/libbackplane.abi; do
    [ -e "$f" ] && basename "$(dirname "$f")"
  done | sort -V
}

# The growable structs of a header: those whose first field is struct_size (docs/abi.md,
# rule 2), by struct tag ("bp_host_api"), one per line.
abi_growable_structs() {
  awk '/^typedef struct [a-z0-9_]+ \{/ { name = $3; getline; if ($0 ~ /^ *size_t struct_size;/) print name }' "$1"
}

# "bp_device_api bp_host_api" -> "bp_device_api_t, bp_host_api_t", for messages.
abi_struct_list() {
  echo "$1" | awk '{ for (i = 1; i <= NF; ++i) printf "%s%s_t", (i > 1 ? ", " : ""), $i }'
}

# A header's declarations without its comments, one declaration or directive per line and
# whitespace collapsed, so that only a change of what it declares shows (a reworded comment or a
# reflowed line does not).
abi_declarations() {
  "${CC:-cc}" -w -x c -fpreprocessed -dD -E -P "$1" | awk '
    function flush(   n, i, parts, s) {
      gsub(/[ \t]+/, " ", text)
      gsub(/[;{}]/, "&\n", text)
      n = split(text, parts, "\n")
      for (i = 1; i <= n; ++i) {
        s = parts[i]; sub(/^ +/, "", s); sub(/ +$/, "", s)
        if (s != "") print s
      }
      text = ""
    }
    /^[ \t]*#/ { flush(); s = $0; gsub(/[ \t]+/, " ", s); sub(/ +$/, "", s); print s; next }
    { text = text " " $0 }
    END { flush() }'
}

# The symbols libbackplane exports, as c_api.h declares them: the name of every BP_EXPORT
# function, one per line, sorted. The one list of the C ABI's symbols: the version script
# (cmake/libbackplane.map) exports bp_* and tests/abi/exported_symbols_test.sh holds the built
# library to exactly this list; abi_describe describes exactly these functions.
abi_exported_symbols() {
  abi_declarations "$1" | sed -n 's/^BP_EXPORT \([^(]*\)(.*/\1/p' | sed 's/.*[ *]//' | LC_ALL=C sort
}

# The symbols a plugin exports, as c_api.h declares them: its entry point
# (BP_PLUGIN_ENTRY_SYMBOL, "bp_plugin_init"), one per line.
abi_plugin_symbols() {
  sed -n 's/^#define BP_PLUGIN_ENTRY_SYMBOL "\([A-Za-z0-9_]*\)".*/\1/p' "$1"
}

# The version node libbackplane's symbols carry (cmake/libbackplane.map): BACKPLANE_<major>.
abi_version_node() {
  echo "BACKPLANE_$(abi_header_version "$1" | cut -d. -f1)"
}

# abi_describe <libbackplane.so> <out.abi> <repository root>: abidw's description of the
# exported C ABI. abidw reads the functions to describe from a symbol list made of
# abi_exported_symbols (its --kmi-whitelist option, which takes any ELF file's list), so the
# description holds the C ABI alone whatever else the library might export. abidw runs in the
# header's folder and is told the header by its base name, which matches however the build
# recorded the path (absolute, or relative under ccache's CCACHE_BASEDIR), so the types of
# c_api.h are public and every other type opaque. The output carries no path, location or
# DT_NEEDED entry, so it does not depend on where or how the library was built (release and
# asan describe the same ABI).
abi_describe() {
  local lib out root list
  lib="$(realpath "$1")"
  out="$(realpath -m "$2")"
  root="$(realpath "$3")"
  list="$(mktemp)"
  {
    echo "[abi_whitelist]"
    abi_exported_symbols "$root/core/include/backplane/c_api.h" | sed 's/^/  /'
  } >"$list"
  (cd "$root/core/include/backplane" &&
    abidw --header-file c_api.h --drop-private-types --exported-interfaces-only \
      --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed --type-id-style hash \
      --kmi-whitelist "$list" --suppressions "$root/cmake/abi/describe.abignore" \
      --out-file "$out" "$lib") || {
    rm -f "$list"
    return 1
  }
  rm -f "$list"
}

# abi_compare <old.abi> <new.abi> <growable struct tags, space-separated> <report file>
# Compares two descriptions with abidiff and sorts the changes. Exit status: 0 the same ABI,
# 1 only additions that a minor may make (docs/abi.md, "What a minor may add"), 2 a change that
# breaks the ABI, 3 abidiff failed. The report file gets one line per change that breaks the
# ABI ("incompatible: ..."), one per addition ("added: ..."), then abidiff's own report.
abi_compare() {
  local old="$1" new="$2" growable="$3" report="$4" raw rc
  raw="$(mktemp)"
  abidiff --leaf-changes-only --harmless --no-show-locs "$old" "$new" >"$raw" 2>&1 && rc=0 || rc=$?
  # abidiff: bit 1 an error, bit 2 a usage error; bits 4 and 8 are ABI changes.
  if [ $((rc & 3)) -ne 0 ]; then
    {
      echo "abidiff failed (status $rc):"
      cat "$raw"
    } >"$report"
    rm -f "$raw"
    return 3
  fi
  # Sorting abidiff's leaf report. Anything this does not recognise as an addition counts as
  # a break, so a kind of change nobody foresaw fails the check instead of passing it.
  awk -v growable="$growable" '
    function bad(what) { print "incompatible: " what; broke = 1 }
    function ok(what) { print "added: " what; grew = 1 }
    function counts(line, kind,   n, i, f) {
      n = split(line, f, " ")
      for (i = 2; i <= n; ++i) {
        if (f[i] ~ /^Removed/ && f[i - 1] + 0 > 0) bad(f[i - 1] " " kind " removed")
        if (f[i] ~ /^Changed/ && f[i - 1] + 0 > 0) bad(f[i - 1] " " kind " changed")
      }
    }
    function end_block() {
      if (block != "" && growing && !(size_seen && inserted)) bad(block ": changed without growing at its end")
      block = ""; growing = 0; size_seen = 0; inserted = 0; old_size = 0; in_insertions = 0
    }
    BEGIN {
      n = split(growable, g, " ")
      for (i = 1; i <= n; ++i) grow[g[i]] = 1
    }
    /^$/ { end_block(); next }
    /^Leaf changes summary:/ || /^Changed leaf types summary:/ { next }
    /^Removed\/Changed\/Added functions summary:/ { counts($0, "function(s)"); next }
    /^Removed\/Changed\/Added variables summary:/ { counts($0, "variable(s)"); next }
    /^Function symbols changes summary:/ { counts($0, "function symbol(s) without debug info"); next }
    /^Variable symbols changes summary:/ { counts($0, "variable symbol(s) without debug info"); next }
    /^[0-9]+ (Removed|Added|Changed)/ || /^[0-9]+ functions? with/ || /^[0-9]+ variables? with/ { next }
    /^  \[A\] / { s = $0; sub(/^  \[A\] /, "", s); ok(s); next }
    /^  \[D\] / { s = $0; sub(/^  \[D\] /, "", s); bad("removed " s); next }
    /^  \[C\] / { s = $0; sub(/^  \[C\] /, "", s); bad("changed " s); next }
    /^'\''/ {
      end_block()
      block = $0; sub(/ changed:$/, "", block)
      kind = $1; sub(/^'\''/, "", kind)
      name = $2; sub(/'\''$/, "", name)
      growing = (kind == "struct" && (name in grow))
      enum = (kind == "enum")
      next
    }
    block != "" && growing && /^  type size changed from [0-9]+ to [0-9]+ \(in bits\)$/ {
      old_size = $5 + 0
      if ($7 + 0 <= old_size) bad(block ": size changed from " $5 " to " $7 " bits")
      size_seen = 1
      next
    }
    block != "" && growing && /^  [0-9]+ data member insertions?:$/ { in_insertions = 1; next }
    block != "" && growing && in_insertions && /^    '\''.*, at offset [0-9]+ \(in bits\)$/ {
      off = $0; sub(/.*, at offset /, "", off); sub(/ .*/, "", off)
      member = $0; sub(/^    /, "", member); sub(/, at offset .*/, "", member)
      if (size_seen && off + 0 >= old_size) { ok(block ": " member " appended"); inserted = 1 }
      else bad(block ": " member " inserted at offset " off " bits, before the end")
      next
    }
    block != "" && enum && (/^  type size hasn.t changed$/ || /^  [0-9]+ enumerator insertions?:$/) { next }
    block != "" && enum && /^    '\''/ { s = $0; sub(/^ +/, "", s); ok(block ": enumerator " s); next }
    block != "" { s = $0; sub(/^ +/, "", s); bad(block ": " s); growing = 0; next }
    /^  / { next }  # the detail under a listed function, judged by its [A]/[D]/[C] line
    { bad("abidiff reported: " $0) }
    END { end_block(); exit broke ? 2 : (grew ? 1 : 0) }
  ' "$raw" >"$report" || true
  local verdict=0
  if grep -q '^incompatible: ' "$report"; then
    verdict=2
  elif grep -q '^added: ' "$report"; then
    verdict=1
  elif [ $((rc & 12)) -ne 0 ]; then
    # abidiff saw a change the sorting above did not list: treat it as a break.
    echo "incompatible: abidiff reported a change (status $rc)" >>"$report"
    verdict=2
  fi
  {
    echo "--- abidiff --leaf-changes-only --harmless $(basename "$(dirname "$old")")/$(basename "$old") (baseline) -> $(basename "$new") (this build):"
    cat "$raw"
  } >>"$report"
  rm -f "$raw"
  return "$verdict"
}
