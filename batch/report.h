/* report.h - batch/ internal: `lis report DIR` (lis_report_html in
 * lis_batch.h), one static HTML page over a lis batch or a lis run output.
 *   report.c        reads the directory, writes DIR/report.html (the page
 *                   with the index of episodes inline) and DIR/report/ep-N.js
 *                   (one episode each, loaded by <script src> on demand:
 *                   fetch() does not work from file://)
 *   report_files.c  an episode's output files, listed and typed for the page
 *   report_page.html  the page (HTML, CSS, JS), embedded at build time
 * docs/report.md says what the page shows and why it is safe to open. */
#ifndef LIS_BATCH_REPORT_H
#define LIS_BATCH_REPORT_H

#include "agent.h"

#include <stddef.h>

/* Text embedded per file and per episode (the rest is a link). */
#define RP_TEXT_FILE_MAX (256u << 10)
#define RP_TEXT_EPISODE_MAX (4u << 20)
#define RP_FILES_MAX 2000 /* entries listed per episode */

/* The files under dfd (an episode's exported output directory), sorted by
 * path, as [{path, size, kind, text?, cut?}]: kind is image, audio, video,
 * html, text, other or link (a symlink, never followed); text (html, text)
 * is the content when it is UTF-8 without NUL bytes, within *budget bytes
 * (lowered by what is taken; "unread" once it is spent, "cut" when only a
 * prefix fits). A file that cannot be read is "other"; over RP_FILES_MAX
 * entries, or deeper than 16 directories, a last entry of kind "more" says
 * so. NULL only when out of memory. Closes dfd. */
cJSON *rp_files(int dfd, size_t *budget);

/* JSON text that is safe anywhere inside a <script> element: '<', '>',
 * '&', U+2028 and U+2029 written as \uXXXX (all of them can only occur in
 * JSON inside strings, where the escape means the same). malloc'ed. */
char *rp_json_script(const cJSON *j);

/* The index's entry of a results row (episode number ep, nfiles output files). */
cJSON *rp_index_row(const cJSON *row, size_t ep, size_t nfiles);
/* What report/ep-N.js holds of one episode, from the output directory dfd:
 * its row, trajectory (traj_name), log (log_name, may be NULL) and output
 * files (files/KEY); *nfiles gets the number of files. NULL: out of memory. */
cJSON *rp_episode(int dfd, size_t n, const cJSON *row, const char *id, int attempt,
                  const char *traj_name, const char *log_name, const char *key, size_t *nfiles);

/* The page; the index JSON goes where RP_PAGE_MARK is, a fresh random
 * nonce (the only inline script allowed to run) where each RP_NONCE_MARK is. */
#define RP_PAGE_MARK "/*LIS-INDEX*/"
#define RP_NONCE_MARK "LIS-NONCE"
const char *rp_page(void);

#endif
