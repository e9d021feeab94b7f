// AG-UI interrupts (RUN_FINISHED with outcome `interrupt`) as CopilotKit's `useInterrupt` hands
// them over: the agent's questions (`ask_question`, with options) and tool approvals, answered
// with a `resume` entry; anything else as its message and a JSON answer.
import { useState } from "react";
import type { Interrupt } from "@ag-ui/client";

interface Question {
  question: string;
  is_multi_select?: boolean;
  options?: { id: string; text: string }[];
}

interface Props {
  interrupt: Interrupt;
  resolve: (payload?: unknown) => Promise<unknown>;
  cancel: () => Promise<unknown>;
}

/** A form's buttons: one that gives up on the interrupt (`cancelLabel`), one that sends the answer. */
function AnswerButtons({ cancelLabel, cancel }: { cancelLabel: string; cancel: () => Promise<unknown> }) {
  return (
    <div className="row">
      <button type="button" className="ghost" onClick={() => void cancel()}>
        {cancelLabel}
      </button>
      <button type="submit" className="primary">
        Send answer
      </button>
    </div>
  );
}

const isQuestion = (reason: string) => reason === "antigravity:ask_question" || reason === "ask_question";
const isApproval = (reason: string) => reason === "antigravity:tool_approval" || reason === "tool_approval";

function QuestionForm({ interrupt, resolve, cancel }: Props) {
  const questions = (interrupt.metadata?.questions as Question[] | undefined) ?? [{ question: interrupt.message ?? "The agent has a question." }];
  const [chosen, setChosen] = useState<string[][]>(questions.map(() => []));
  const toggle = (qi: number, id: string, multi: boolean) =>
    setChosen((current) => current.map((ids, i) => (i !== qi ? ids : multi ? (ids.includes(id) ? ids.filter((x) => x !== id) : [...ids, id]) : [id])));
  return (
    <form
      className="interrupt question"
      data-reason={interrupt.reason}
      onSubmit={(event) => {
        event.preventDefault();
        void resolve({ responses: chosen.map((ids) => (ids.length ? { selected_option_ids: ids } : { selected_option_ids: [], skipped: true })) });
      }}
    >
      <div className="interrupt-head">
        <span className="badge">question</span> The agent asks
      </div>
      {questions.map((q, qi) => (
        <fieldset key={qi}>
          <legend>{q.question}</legend>
          {(q.options ?? []).map((option) => (
            <label key={option.id} className="option">
              <input type={q.is_multi_select ? "checkbox" : "radio"} name={`q${qi}`} value={option.id} onChange={() => toggle(qi, option.id, !!q.is_multi_select)} />
              <span>{option.text}</span>
            </label>
          ))}
        </fieldset>
      ))}
      <AnswerButtons cancelLabel="Skip" cancel={cancel} />
    </form>
  );
}

function ApprovalForm({ interrupt, resolve }: Props) {
  const [reason, setReason] = useState("");
  const tool = typeof interrupt.metadata?.tool_name === "string" ? interrupt.metadata.tool_name : "a tool";
  return (
    <div className="interrupt approval" data-reason={interrupt.reason}>
      <div className="interrupt-head">
        <span className="badge warn">approval</span> {interrupt.message ?? `Allow ${tool}?`}
      </div>
      {interrupt.metadata?.args !== undefined ? <pre className="tool-args">{JSON.stringify(interrupt.metadata.args, null, 2)}</pre> : null}
      <input className="deny-reason" placeholder="Reason (optional, told to the agent)" value={reason} onChange={(e) => setReason(e.target.value)} />
      <div className="row">
        <button type="button" className="danger" onClick={() => void resolve({ approved: false, ...(reason.trim() ? { message: reason.trim() } : {}) })}>
          Deny
        </button>
        <button type="button" className="primary" onClick={() => void resolve({ approved: true })}>
          Approve
        </button>
      </div>
    </div>
  );
}

function GenericForm({ interrupt, resolve, cancel }: Props) {
  const [text, setText] = useState("{}");
  const [error, setError] = useState<string | null>(null);
  return (
    <form
      className="interrupt generic"
      data-reason={interrupt.reason}
      onSubmit={(event) => {
        event.preventDefault();
        try {
          void resolve(JSON.parse(text));
        } catch (e) {
          setError(`Not valid JSON: ${(e as Error).message}`);
        }
      }}
    >
      <div className="interrupt-head">
        <span className="badge">{interrupt.reason}</span> {interrupt.message ?? "The agent is waiting for an answer."}
      </div>
      <textarea rows={3} value={text} onChange={(e) => setText(e.target.value)} aria-label="Answer (JSON)" />
      {error ? <div className="error">{error}</div> : null}
      <AnswerButtons cancelLabel="Cancel it" cancel={cancel} />
    </form>
  );
}

/** The form for one interrupt. */
export function InterruptCard(props: Props) {
  if (isQuestion(props.interrupt.reason)) return <QuestionForm {...props} />;
  if (isApproval(props.interrupt.reason)) return <ApprovalForm {...props} />;
  return <GenericForm {...props} />;
}
