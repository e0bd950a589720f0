// paykit's merchant API for TypeScript: openapi-fetch over the types openapi-typescript
// generates from openapi/openapi.yaml (src/schema.ts, never edited by hand), and what the
// contract cannot say: one Idempotency-Key per logical request reused on its retries,
// problem+json answers as PaykitError, and the events feed read page by page (a cursor
// older than paykit's horizon as CursorExpiredError).
import createClient from "openapi-fetch";
import type { Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
export type Schemas = components["schemas"];
export type CheckoutResult = Schemas["CheckoutResult"];
export type CreatePaymentRequest = Schemas["CreatePaymentRequest"];
export type CreateRefundRequest = Schemas["CreateRefundRequest"];
export type Event = Schemas["Event"];
export type Payment = Schemas["Payment"];
export type Problem = Schemas["Problem"];
export type ProblemCode = Schemas["ProblemCode"];
export type Refund = Schemas["Refund"];

/** Options of a Paykit client; every field may be left out. */
export interface Options {
  /** The fetch to call with (globalThis.fetch by default). */
  fetch?: (input: Request) => Promise<Response>;
  /** Tries of one logical request, the first included (4 by default; 1: no retry). */
  maxAttempts?: number;
  /**
   * Wait before the first retry in ms, doubled before each next one up to 5 s; a longer
   * Retry-After is waited instead (250 by default).
   */
  backoffMs?: number;
  /** Makes the Idempotency-Key of a request not given one ("pk_" and 32 random hex characters by default). */
  newKey?: () => string;
}

/** Options of one logical request. */
export interface CallOptions {
  /**
   * The Idempotency-Key to send instead of a new random one: store it with the order to
   * repeat the request later, from any process, and get the first answer again.
   */
  idempotencyKey?: string;
  /** Aborts the request and its retries. */
  signal?: AbortSignal;
}

/** The answer to a request that creates or changes something. */
export interface Result<T> {
  value: T;
  /** The HTTP status (a cancel answers 202 while Alipay has not confirmed). */
  status: number;
  /** True when the answer is the stored one of an earlier request with the same key. */
  replayed: boolean;
  /** The Idempotency-Key the request was sent with. */
  idempotencyKey: string;
}

/** An answer of status 400 or above, with paykit's problem+json body decoded. */
export class PaykitError extends Error {
  readonly status: number;
  /** The problem, or undefined when the body was not one (a proxy's error page, say). */
  readonly problem: Problem | undefined;
  /** The answer's Retry-After in ms, 0 without one. */
  readonly retryAfterMs: number;

  constructor(status: number, body: unknown, retryAfter: string | null) {
    const problem = isProblem(body) ? body : undefined;
    super(
      `paykit: HTTP ${status}` +
        (problem ? ` ${problem.code}: ${problem.detail || problem.title}` : ""),
    );
    this.name = "PaykitError";
    this.status = status;
    this.problem = problem;
    const s = Number(retryAfter);
    this.retryAfterMs = Number.isInteger(s) && s > 0 ? s * 1000 : 0;
  }

  /** The problem's code, or undefined. */
  get code(): ProblemCode | undefined {
    return this.problem?.code;
  }

  /** Whether the same request may pass if sent again later. */
  get temporary(): boolean {
    if ([429, 502, 503, 504].includes(this.status)) return true;
    return this.status === 409 && (this.code === "in_flight" || this.code === "payment_finishing");
  }
}

/**
 * EventFeed.next's error when the cursor is older than paykit's horizon: events after it
 * were deleted past their retention (410 cursor_expired). The feed's cursor stays where
 * it was; start a feed again from oldestCursor, knowing the events before it are gone, or
 * from the start ("") to list every event still kept.
 */
export class CursorExpiredError extends PaykitError {
  /** The oldest cursor still valid. */
  readonly oldestCursor: string;

  constructor(err: PaykitError) {
    super(err.status, err.problem, null);
    this.name = "CursorExpiredError";
    this.oldestCursor = err.problem?.oldest_cursor ?? "";
  }
}

function isProblem(body: unknown): body is Problem {
  return typeof body === "object" && body !== null && typeof (body as Problem).code === "string";
}

function randomKey(): string {
  const b = new Uint8Array(16);
  globalThis.crypto.getRandomValues(b);
  return "pk_" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** What every openapi-fetch call resolves to. */
interface Fetched<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** paykit's merchant API. */
export class Paykit {
  /** The generated openapi-fetch client (authenticated; no retries, no typed errors). */
  readonly raw: Client<paths>;
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly newKey: () => string;

  /** A client of the paykit API at baseUrl that authenticates with the tenant's API key. */
  constructor(baseUrl: string, apiKey: string, options: Options = {}) {
    this.raw = createClient<paths>({
      baseUrl: baseUrl.replace(/\/$/, ""),
      headers: { Authorization: `Bearer ${apiKey}` },
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.maxAttempts = options.maxAttempts && options.maxAttempts > 0 ? options.maxAttempts : 4;
    this.backoffMs = options.backoffMs && options.backoffMs > 0 ? options.backoffMs : 250;
    this.newKey = options.newKey ?? randomKey;
  }

  /** One logical request: call, retried while the failure is temporary. */
  private async send<T>(
    call: () => Promise<Fetched<T>>,
    signal?: AbortSignal,
  ): Promise<{ data: T; response: Response }> {
    let wait = this.backoffMs;
    for (let attempt = 1; ; attempt++) {
      let r: Fetched<T>;
      try {
        r = await call();
      } catch (e) {
        // The answer was lost: only a retry with the same key can tell what happened.
        if (signal?.aborted || attempt >= this.maxAttempts) throw e;
        await sleep(wait, signal);
        wait = Math.min(2 * wait, 5000);
        continue;
      }
      if (r.response.ok) {
        if (r.data === undefined) throw new Error(`paykit: unexpected answer HTTP ${r.response.status}`);
        return { data: r.data, response: r.response };
      }
      const err = new PaykitError(r.response.status, r.error, r.response.headers.get("Retry-After"));
      if (!err.temporary || attempt >= this.maxAttempts) throw err;
      await sleep(Math.max(wait, err.retryAfterMs), signal);
      wait = Math.min(2 * Math.max(wait, err.retryAfterMs), 5000);
    }
  }

  private static result<T>(data: T, response: Response, key: string): Result<T> {
    return {
      value: data,
      status: response.status,
      replayed: response.headers.get("Idempotent-Replayed") === "true",
      idempotencyKey: key,
    };
  }

  /**
   * Creates the pending payment of an order, or joins the one already being paid. A paid
   * order throws a PaykitError with code order_already_paid and the paid payment in
   * problem.payment (set repurchase to charge it again).
   */
  async createPayment(req: CreatePaymentRequest, opts: CallOptions = {}): Promise<Result<CheckoutResult>> {
    const key = opts.idempotencyKey ?? this.newKey();
    const { data, response } = await this.send(
      () =>
        this.raw.POST("/v1/payments", {
          params: { header: { "Idempotency-Key": key } },
          body: req,
          signal: opts.signal,
        }),
      opts.signal,
    );
    return Paykit.result(data, response, key);
  }

  /** Reads a payment. */
  async getPayment(paymentNo: string, signal?: AbortSignal): Promise<Payment> {
    const { data } = await this.send(
      () => this.raw.GET("/v1/payments/{payment_no}", { params: { path: { payment_no: paymentNo } }, signal }),
      signal,
    );
    return data;
  }

  /**
   * Cancels a pending payment: 200 with the payment CLOSED (or as it was, if it had
   * ended), or 202 with it still PENDING while Alipay has not confirmed the close. A
   * payment Alipay says is paid throws a PaykitError with code order_already_paid.
   */
  async cancelPayment(paymentNo: string, opts: CallOptions = {}): Promise<Result<Payment>> {
    const key = opts.idempotencyKey ?? this.newKey();
    const { data, response } = await this.send(
      () =>
        this.raw.POST("/v1/payments/{payment_no}/cancel", {
          params: { path: { payment_no: paymentNo }, header: { "Idempotency-Key": key } },
          body: {},
          signal: opts.signal,
        }),
      opts.signal,
    );
    return Paykit.result(data, response, key);
  }

  /**
   * Refunds part or all of a PAID payment. Without refund_no, paykit derives the refund's
   * number from the Idempotency-Key, so a retry is never a second refund.
   */
  async createRefund(paymentNo: string, req: CreateRefundRequest, opts: CallOptions = {}): Promise<Result<Refund>> {
    const key = opts.idempotencyKey ?? this.newKey();
    const { data, response } = await this.send(
      () =>
        this.raw.POST("/v1/payments/{payment_no}/refunds", {
          params: { path: { payment_no: paymentNo }, header: { "Idempotency-Key": key } },
          body: req,
          signal: opts.signal,
        }),
      opts.signal,
    );
    return Paykit.result(data, response, key);
  }

  /** Reads a refund. */
  async getRefund(refundNo: string, signal?: AbortSignal): Promise<Refund> {
    const { data } = await this.send(
      () => this.raw.GET("/v1/refunds/{refund_no}", { params: { path: { refund_no: refundNo } }, signal }),
      signal,
    );
    return data;
  }

  /** Lists every refund of a payment, oldest first, reading all the pages. */
  async refunds(paymentNo: string, signal?: AbortSignal): Promise<Refund[]> {
    const all: Refund[] = [];
    let after: string | undefined;
    for (;;) {
      const { data } = await this.send(
        () =>
          this.raw.GET("/v1/payments/{payment_no}/refunds", {
            params: { path: { payment_no: paymentNo }, query: after ? { after } : {} },
            signal,
          }),
        signal,
      );
      all.push(...data.refunds);
      if (!data.has_more) return all;
      after = data.next_cursor;
    }
  }

  /**
   * The events feed after cursor ("" for the start), in pages of up to limit events
   * (paykit's default of 50 if left out).
   */
  events(cursor = "", limit?: number): EventFeed {
    return new EventFeed(this, cursor, limit);
  }

  /** @internal One page of the feed. */
  async eventsPage(after: string, limit: number | undefined, signal?: AbortSignal) {
    const query: { after?: string; limit?: number } = {};
    if (after) query.after = after;
    if (limit) query.limit = limit;
    const { data } = await this.send(() => this.raw.GET("/v1/events", { params: { query }, signal }), signal);
    return data;
  }
}

/**
 * The tenant's events feed read page by page. Keep cursor after handling a page to resume
 * from there later, in this process or another.
 */
export class EventFeed {
  constructor(
    private readonly client: Paykit,
    private after: string,
    private readonly limit?: number,
  ) {}

  /** Where the next page starts. */
  get cursor(): string {
    return this.after;
  }

  /**
   * Reads the page after the cursor and moves the cursor past it. more is true while
   * further events are already waiting; once it is false, call next again later for new
   * ones (an empty page leaves the cursor where it is). A cursor older than paykit's
   * horizon throws a CursorExpiredError.
   */
  async next(signal?: AbortSignal): Promise<{ events: Event[]; more: boolean }> {
    let page;
    try {
      page = await this.client.eventsPage(this.after, this.limit, signal);
    } catch (err) {
      if (err instanceof PaykitError && err.code === "cursor_expired") throw new CursorExpiredError(err);
      throw err;
    }
    if (page.next_cursor) this.after = page.next_cursor;
    return { events: page.events, more: page.has_more };
  }
}
