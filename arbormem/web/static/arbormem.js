// arbormem web view: the only script. Expands and collapses topics, loads a leaf's
// messages into place on first opening, and brings a linked message into view.
"use strict";

async function toggle(button) {
  const panel = document.getElementById(button.getAttribute("aria-controls"));
  if (!panel) return;
  const opening = button.getAttribute("aria-expanded") !== "true";
  button.setAttribute("aria-expanded", String(opening));
  panel.hidden = !opening;
  if (opening && button.dataset.src && !panel.dataset.loaded) {
    panel.setAttribute("aria-busy", "true");
    panel.textContent = "Loading…";
    try {
      const response = await fetch(button.dataset.src, { credentials: "same-origin" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      panel.innerHTML = await response.text();
      panel.dataset.loaded = "1";
    } catch (error) {
      panel.innerHTML = "";
      const p = document.createElement("p");
      p.setAttribute("role", "alert");
      p.textContent = "Could not load these messages (" + error.message + ").";
      panel.appendChild(p);
    } finally {
      panel.removeAttribute("aria-busy");
    }
  }
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-toggle]");
  if (button) {
    event.preventDefault();
    toggle(button);
    return;
  }
  const all = event.target.closest("button[data-toggle-all]");
  if (all) {
    const open = all.dataset.toggleAll === "open";
    for (const b of document.querySelectorAll("button[data-toggle]:not([data-src])")) {
      if ((b.getAttribute("aria-expanded") === "true") !== open) toggle(b);
    }
  }
});

window.addEventListener("DOMContentLoaded", () => {
  const target = document.querySelector(".target");
  if (target) {
    target.scrollIntoView({ block: "center" });
    target.focus({ preventScroll: true });
  }
});
