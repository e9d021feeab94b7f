// Markdown to sanitised HTML: marked renders, DOMPurify keeps only safe markup.
import DOMPurify from "dompurify";
import { marked } from "marked";

marked.setOptions({ gfm: true, breaks: false, async: false });

/** Sanitised HTML for `text` (Markdown, possibly incomplete while it streams). */
export function markdown(text: string): string {
  const html = marked.parse(text, { async: false });
  return DOMPurify.sanitize(html, {
    // Inline styles are refused by the page's Content-Security-Policy anyway.
    FORBID_ATTR: ["style"],
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select"],
  });
}

// Links open in a new tab, without access to this page.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.getAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});
