/*
 * The flame graph's and the HTML report's script and style sheets, embedded
 * in ptfil-view: the files beside this header, turned into the C strings of
 * the generated assets.c by the rules in assets.mk.
 */
#ifndef PTFIL_ASSETS_H
#define PTFIL_ASSETS_H

extern const char asset_flame_js[];   /* flame.js: zoom, search, charged/reserved toggle */
extern const char asset_flame_css[];  /* flame.css: the flame graph's style */
extern const char asset_report_js[];  /* report.js: the HTML report's timeline and tables */
extern const char asset_report_css[]; /* report.css: the HTML report's page style */

#endif
