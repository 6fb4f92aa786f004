# Placeholder (owned by the SVG/HTML work): rules that embed tools/assets/* into C.
