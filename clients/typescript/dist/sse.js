// The JSON payloads of a Server-Sent Events response. @ag-ui/client's own reader
// (`runHttpRequest`) rethrows the error of cancelling a body that already failed, which surfaces
// as an unhandled rejection whenever a stream breaks; this one ends the stream with that error
// once, and a cancel of a broken body stays quiet.
import { Observable } from "rxjs";
/** An event the client cannot take (not JSON, no type, or refused by its schema): not a broken stream. */
export class InvalidEventError extends Error {
    /** `detail` says what is wrong with the event. */
    constructor(detail, options) {
        super(`Invalid event: ${detail}`, options);
        this.name = "InvalidEventError";
    }
}
/** Dispatches the `data` lines of each complete SSE frame in `text`; returns the incomplete rest. */
function frames(text, emit) {
    const parts = text.split(/\r?\n\r?\n/);
    const rest = parts.pop() ?? "";
    for (const part of parts) {
        const data = part
            .split(/\r?\n/)
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).replace(/^ /, ""));
        if (data.length)
            emit(data.join("\n"));
    }
    return rest;
}
/**
 * The parsed `data` of every SSE frame of the response `respond()` resolves to, in order; errors
 * with what `respond()` throws, with a frame that is not JSON, or with the body's read error.
 * Unsubscribing cancels the body.
 */
export function sseJson(respond) {
    return new Observable((subscriber) => {
        let reader;
        let done = false;
        (async () => {
            const response = await respond();
            if (!response.body)
                throw new Error("the response has no body");
            reader = response.body.getReader();
            const decoder = new TextDecoder("utf-8");
            let buffer = "";
            const emit = (data) => {
                let json;
                try {
                    json = JSON.parse(data);
                }
                catch {
                    throw new InvalidEventError(`the frame is not JSON: ${data.slice(0, 200)}`);
                }
                subscriber.next(json);
            };
            for (;;) {
                const { done: ended, value } = await reader.read();
                if (subscriber.closed)
                    return;
                if (ended)
                    break;
                buffer = frames(buffer + decoder.decode(value, { stream: true }), emit);
            }
            // An incomplete last frame is discarded, as the SSE standard says: the stream was cut.
        })().then(() => {
            done = true;
            subscriber.complete();
        }, (error) => {
            done = true;
            subscriber.error(error);
        });
        return () => {
            if (!done)
                reader?.cancel().catch(() => undefined);
        };
    });
}
/** The frame of the lines of one block, or undefined for a block of comments only (keep-alives). */
function parseFrame(block) {
    let event = "message";
    const data = [];
    for (const line of block.split(/\r?\n/)) {
        if (line.startsWith("event:"))
            event = line.slice(6).trim();
        else if (line.startsWith("data:"))
            data.push(line.slice(5).replace(/^ /, ""));
    }
    return data.length ? { event, data: data.join("\n") } : undefined;
}
/**
 * The frames of an SSE body as they arrive; ends when the body does (an incomplete last frame
 * is discarded), throws the body's read error. Leaving the loop early cancels the body.
 */
export async function* sseFrames(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder("utf-8");
    let buffer = "";
    let finished = false;
    try {
        for (;;) {
            const { done, value } = await reader.read();
            if (done) {
                finished = true;
                return;
            }
            buffer += decoder.decode(value, { stream: true });
            const blocks = buffer.split(/\r?\n\r?\n/);
            buffer = blocks.pop() ?? "";
            for (const block of blocks) {
                const frame = parseFrame(block);
                if (frame)
                    yield frame;
            }
        }
    }
    catch (error) {
        finished = true;
        throw error;
    }
    finally {
        // A consumer that stopped early: the connection is not needed any more.
        if (!finished)
            reader.cancel().catch(() => undefined);
    }
}
