#!/usr/bin/env bash
# A CJK font, so that Chinese tokens in figures (seqlab.fonts) are drawn as characters, not boxes:
# Debian's fonts-wqy-microhei, installed when no font lists Chinese and this is root with
# apt-get; otherwise a one-line note. Never fails: figures only warn without one.
package=fonts-wqy-microhei
[ -n "$(fc-list :lang=zh 2>/dev/null)" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    if apt-get install -y -qq "$package" >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "$package" >/dev/null 2>&1; }; then
        # matplotlib reads its list of fonts from a cache made before the font was there
        rm -f "${MPLCONFIGDIR:-${XDG_CACHE_HOME:-$HOME/.cache}/matplotlib}"/fontlist-*.json
        echo "installed $package: Chinese text in figures"
    else
        echo "note: could not install $package (offline?): Chinese text in figures shows boxes"
    fi
else
    echo "note: Chinese labels in figures need a CJK font: apt-get install $package"
fi
exit 0
