// A Crawlee crawler (CheerioCrawler) that asks simhash-filter serve about every HTML page it downloads and skips
// the near-duplicates: their data is not saved and their links are not followed.
//
//   FILTER_URL=http://127.0.0.1:8750 node crawl.mjs https://example.com/ [more start URLs]
//
// Environment: FILTER_URL (the service; default http://127.0.0.1:8750), SIMHASH_SERVE_TOKEN (its token, if it
// has one), CRAWL_OUTPUT (a JSON Lines file: one line per page, the service's decision, in the order decided),
// CRAWL_MAX_PAGES (default 1000), CRAWL_CONCURRENCY (default 4).
import { appendFileSync } from 'node:fs';
import { CheerioCrawler, Configuration, log } from '@crawlee/cheerio';

const service = (process.env.FILTER_URL ?? 'http://127.0.0.1:8750').replace(/\/$/, '');
const token = process.env.SIMHASH_SERVE_TOKEN;
const output = process.env.CRAWL_OUTPUT;
const startUrls = process.argv.slice(2);
if (!startUrls.length) {
    console.error('usage: node crawl.mjs START_URL...');
    process.exit(2);
}

// The service's decision on one downloaded page: its bytes as downloaded, with its URL and Content-Type (charset).
async function decide(url, body, contentType) {
    const headers = { 'Content-Type': contentType ?? 'text/html' };
    if (token) headers.Authorization = `Bearer ${token}`;
    for (let attempt = 0; ; attempt++) {
        const answer = await fetch(`${service}/v1/pages?url=${encodeURIComponent(url)}`,
            { method: 'POST', body, headers });
        if (answer.status === 429 && attempt < 10) { // busy: wait as told, then send it again
            const seconds = Number(answer.headers.get('retry-after') ?? '1');
            await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
            continue;
        }
        if (!answer.ok) throw new Error(`simhash-filter serve: ${answer.status} ${await answer.text()}`);
        return answer.json();
    }
}

const crawler = new CheerioCrawler({
    maxRequestsPerCrawl: Number(process.env.CRAWL_MAX_PAGES ?? 1000),
    maxConcurrency: Number(process.env.CRAWL_CONCURRENCY ?? 4),
    async requestHandler({ request, response, body, enqueueLinks, pushData }) {
        if (response.statusCode >= 300) return; // Crawlee hands 4xx pages over too: not pages of the site
        // Crawlee hands an HTML page over decoded (a string): it goes as UTF-8; bytes go with their own Content-Type
        const [bytes, type] = typeof body === 'string'
            ? [body, 'text/html; charset=utf-8'] : [body, response.headers['content-type']];
        const decision = await decide(request.loadedUrl ?? request.url, bytes, type);
        if (output) appendFileSync(output, `${JSON.stringify(decision)}\n`);
        if (decision.duplicate_of) {
            log.info(`near-duplicate of ${decision.duplicate_of} (distance ${decision.distance}): skipped ${request.url}`);
            return; // not saved, links not followed
        }
        await pushData({ url: request.url, fingerprint: decision.fingerprint });
        await enqueueLinks({ strategy: 'same-hostname' });
    },
}, new Configuration({ persistStorage: false }));

await crawler.run(startUrls);
