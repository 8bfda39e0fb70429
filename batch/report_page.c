/* report_page.c - the page of `lis report` (batch/report_page.html, its
 * HTML, CSS and JS), embedded in liblis-agent.so at build time (.incbin, as
 * batch/score_worker.c embeds its worker): one file to read and edit, and
 * never out of step with the JSON that report.c writes for it. */
#include "report.h"

__asm__(".section .rodata\n"
        ".global lis_report_page_html\n"
        ".hidden lis_report_page_html\n"
        "lis_report_page_html:\n"
        ".incbin \"batch/report_page.html\"\n"
        ".byte 0\n"
        ".previous\n");
extern const char lis_report_page_html[];

const char *rp_page(void) { return lis_report_page_html; }
