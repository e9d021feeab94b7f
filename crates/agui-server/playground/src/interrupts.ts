// Interrupts (RUN_FINISHED outcome `interrupt`) as forms, answered with `resume` entries:
// `ask_question` as its questions and options, `tool_approval` as approve/deny, anything else
// (a server tool's interrupt) as its message and a JSON answer box.
import type { Interrupt, ResumeEntry } from "@ag-ui/client";
import { h, pretty } from "./dom";

/** The interrupt reasons the agent uses (`/capabilities` custom.interruptReasons). */
export interface Reasons {
  question: string[];
  approval: string[];
}

/** Both naming conventions the server can be configured with (`interrupt_reasons`). */
export const DEFAULT_REASONS: Reasons = {
  question: ["antigravity:ask_question", "ask_question"],
  approval: ["antigravity:tool_approval", "tool_approval"],
};

interface QuestionOption {
  id: string;
  text: string;
}
interface Question {
  question: string;
  is_multi_select?: boolean;
  options?: QuestionOption[];
}

/** The form for one interrupt; `answer` receives its resume entry. */
export function interruptForm(
  interrupt: Interrupt,
  reasons: Reasons,
  answer: (entry: ResumeEntry) => void,
): HTMLElement {
  const cancel = () => answer({ interruptId: interrupt.id, status: "cancelled" });
  const card = h("div", { class: "interrupt", "data-reason": interrupt.reason, "data-interrupt-id": interrupt.id });
  if (reasons.question.includes(interrupt.reason)) {
    card.append(questionForm(interrupt, answer, cancel));
  } else if (reasons.approval.includes(interrupt.reason)) {
    card.append(approvalForm(interrupt, answer));
  } else {
    card.append(genericForm(interrupt, answer, cancel));
  }
  return card;
}

function questionForm(interrupt: Interrupt, answer: (e: ResumeEntry) => void, cancel: () => void): HTMLElement {
  const questions = (interrupt.metadata?.questions as Question[] | undefined) ?? [
    { question: interrupt.message ?? "The agent has a question." },
  ];
  const form = h("form", { class: "question-form" });
  form.append(h("div", { class: "interrupt-head" }, h("span", { class: "badge" }, "question"), " The agent asks"));
  questions.forEach((q, qi) => {
    const field = h("fieldset", { class: "question", "data-index": qi });
    field.append(h("legend", {}, q.question));
    for (const option of q.options ?? []) {
      const input = h("input", {
        type: q.is_multi_select ? "checkbox" : "radio",
        name: `q${qi}`,
        value: option.id,
      });
      field.append(h("label", { class: "option" }, input, h("span", {}, option.text)));
    }
    field.append(
      h("input", {
        type: "text",
        class: "freeform",
        name: `q${qi}-free`,
        placeholder: q.options?.length ? "Or write your own answer" : "Your answer",
        "aria-label": `Your answer to: ${q.question}`,
      }),
    );
    form.append(field);
  });
  form.append(
    h(
      "div",
      { class: "row" },
      h("button", { type: "button", class: "ghost", onclick: cancel }, "Skip"),
      h("button", { type: "submit", class: "primary" }, "Send answer"),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const responses = questions.map((_, qi) => {
      const selected = [...form.querySelectorAll<HTMLInputElement>(`input[name="q${qi}"]:checked`)].map((i) => i.value);
      const free = form.querySelector<HTMLInputElement>(`input[name="q${qi}-free"]`)?.value.trim() ?? "";
      return {
        selected_option_ids: selected,
        ...(free ? { freeform_response: free } : {}),
        ...(!selected.length && !free ? { skipped: true } : {}),
      };
    });
    answer({ interruptId: interrupt.id, status: "resolved", payload: { responses } });
  });
  return form;
}

function approvalForm(interrupt: Interrupt, answer: (e: ResumeEntry) => void): HTMLElement {
  const tool = typeof interrupt.metadata?.tool_name === "string" ? interrupt.metadata.tool_name : "a tool";
  const reason = h("input", { type: "text", class: "deny-reason", placeholder: "Reason (optional, told to the agent)", "aria-label": "Reason" });
  const decide = (approved: boolean) => {
    const message = reason.value.trim();
    answer({
      interruptId: interrupt.id,
      status: "resolved",
      payload: approved ? { approved: true } : { approved: false, ...(message ? { message } : {}) },
    });
  };
  return h(
    "div",
    { class: "approval-form" },
    h("div", { class: "interrupt-head" }, h("span", { class: "badge warn" }, "approval"), " ", interrupt.message ?? `Allow ${tool}?`),
    interrupt.metadata?.args !== undefined ? h("pre", { class: "json" }, pretty(interrupt.metadata.args)) : null,
    reason,
    h(
      "div",
      { class: "row" },
      h("button", { type: "button", class: "danger deny", onclick: () => decide(false) }, "Deny"),
      h("button", { type: "button", class: "primary approve", onclick: () => decide(true) }, "Approve"),
    ),
  );
}

function genericForm(interrupt: Interrupt, answer: (e: ResumeEntry) => void, cancel: () => void): HTMLElement {
  const area = h("textarea", { class: "json-answer", rows: 4, spellcheck: "false", "aria-label": "Answer (JSON)" });
  area.value = "{}";
  const error = h("div", { class: "error small", hidden: true });
  const form = h(
    "form",
    { class: "generic-form" },
    h("div", { class: "interrupt-head" }, h("span", { class: "badge" }, interrupt.reason), " ", interrupt.message ?? "The agent is waiting for an answer."),
    interrupt.responseSchema
      ? h("details", { class: "raw" }, h("summary", {}, "expected answer (JSON Schema)"), h("pre", { class: "json" }, pretty(interrupt.responseSchema)))
      : null,
    area,
    error,
    h(
      "div",
      { class: "row" },
      h("button", { type: "button", class: "ghost", onclick: cancel }, "Cancel it"),
      h("button", { type: "submit", class: "primary" }, "Send answer"),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    try {
      const payload: unknown = JSON.parse(area.value);
      answer({ interruptId: interrupt.id, status: "resolved", payload });
    } catch (e) {
      error.hidden = false;
      error.textContent = `Not valid JSON: ${(e as Error).message}`;
    }
  });
  return form;
}
