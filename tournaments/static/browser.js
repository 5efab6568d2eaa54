// The episode browser of `arena report` (tournaments/browser.py writes the data files).
// Pages, chosen by the URL's hash:
//   #all                      every pairing
//   #seller=SPEC, #buyer=LBL  the pairings of one seller or buyer entry
//   #pairing=K                a pairing's episodes, filtered by outcome, sorted by reward
//   #pairing=K&episode=ID     one episode: players, private values, chart, transcript
// Data files are loaded on demand with <script src> (browsers refuse fetch() on file://).
// Text from the data goes into the page as text nodes; the charts are SVG written by
// tournaments/zone_chart.py with every text escaped.
(function () {
  "use strict";
  var data = window.arenaData = window.arenaData || {pairing: {}, episode: {}};
  data.pairing = data.pairing || {};
  data.episode = data.episode || {};
  var app = document.getElementById("app");

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") node.textContent = attrs[key];
      else node.setAttribute(key, attrs[key]);
    });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function link(text, hash) {
    return el("a", {href: "#" + hash, text: text});
  }

  function number(value, digits) {
    return value === null || value === undefined ? "-" : value.toFixed(digits);
  }

  function load(src, ready) {
    if (ready()) return Promise.resolve();
    return new Promise(function (resolve, reject) {
      var script = el("script", {src: src});
      script.onload = function () { resolve(); };
      script.onerror = function () { reject(new Error("cannot load " + src)); };
      document.head.appendChild(script);
    });
  }

  function params() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) out[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1));
    });
    return out;
  }

  function table(headers, rows, className) {
    var head = el("tr", {}, headers.map(function (h) { return el("th", {text: h}); }));
    var body = rows.map(function (cells) {
      return el("tr", {}, cells.map(function (cell) {
        return el("td", {}, [cell === null || cell === undefined ? "" : cell]);
      }));
    });
    return el("table", {"class": className || ""}, [el("thead", {}, [head]),
                                                    el("tbody", {}, body)]);
  }

  function show(title, nodes) {
    app.textContent = "";
    app.appendChild(el("h1", {text: title}));
    nodes.forEach(function (node) { app.appendChild(node); });
    document.title = title + " - bargain-arena";
  }

  function pairingsView(title, pairings) {
    var rows = pairings.map(function (p) {
      return [link(p.seller, "seller=" + encodeURIComponent(p.seller)),
              link(p.buyers, "buyer=" + encodeURIComponent(p.buyers)),
              link(p.episodes + " episodes", "pairing=" + p.id),
              number(p.mean_reward, 3), number(p.deal_rate, 3),
              String(p.tokens_per_episode), number(p.cost_per_1k_episodes, 3)];
    });
    show(title, [
      el("p", {text: "Database " + data.index.db + ". Open a pairing to read its episodes."}),
      table(["Seller", "Buyers", "Episodes", "Mean seller reward", "Deal rate",
             "Tokens/episode", "$/1k episodes"], rows, "pairings")]);
  }

  function pairingView(id, query) {
    var p = data.index.pairings[id];
    var episodes = data.pairing[id].slice();
    var outcome = query.outcome || "";
    var order = query.sort || "-reward";
    if (outcome) episodes = episodes.filter(function (e) { return e.outcome === outcome; });
    episodes.sort(function (a, b) {
      if (order === "scenario") return a.scenario - b.scenario || a.id - b.id;
      var d = order === "reward" ? a.reward - b.reward : b.reward - a.reward;
      return d || a.id - b.id;
    });
    function choose(name, value, options) {
      var select = el("select", {id: name}, options.map(function (o) {
        var option = el("option", {value: o[0], text: o[1]});
        if (o[0] === value) option.selected = true;
        return option;
      }));
      select.onchange = function () {
        var next = {outcome: outcome, sort: order};
        next[name] = select.value;
        location.hash = "pairing=" + id + (next.outcome ? "&outcome=" + next.outcome : "") +
          "&sort=" + next.sort;
      };
      return el("label", {}, [name + " ", select]);
    }
    var note = p.sampled < p.episodes
      ? "Showing a sample of " + p.sampled + " of the " + p.episodes + " stored episodes " +
        "(every outcome in proportion, spread over the reward range; at most " + data.index.cap +
        " per pairing)."
      : "All " + p.episodes + " stored episodes.";
    var rows = episodes.map(function (e) {
      return [link("#" + e.id, "pairing=" + id + "&episode=" + e.id), e.tournament,
              e.seed + "/" + e.scenario, e.outcome, number(e.reward, 3), e.price, e.buyer,
              String(e.turns), e.tokens ? String(e.tokens) : ""];
    });
    show(p.seller + " vs " + p.buyers, [
      el("p", {"class": "note", text: note}),
      el("p", {}, [
        choose("outcome", outcome, [["", "all outcomes"], ["deal", "deal"],
                                    ["no_deal", "no deal"], ["violation", "violation"],
                                    ["error", "error"]]),
        " ",
        choose("sort", order, [["-reward", "reward, highest first"],
                               ["reward", "reward, lowest first"], ["scenario", "scenario"]])]),
      el("p", {text: rows.length + " episodes listed."}),
      table(["Episode", "Tournament", "Seed/scenario", "Outcome", "Seller reward", "Price",
             "Buyer", "Seller turns", "Tokens"], rows, "episodes")]);
  }

  function episodeView(pairing, e) {
    var players = table(["Seat", "Agent", "Private value (operator's view)", "Opening",
                         "Reward", "Tokens"],
      e.players.map(function (p) {
        return [p.seat, p.agent, p.private, p.opening, number(p.reward, 3),
                p.tokens ? String(p.tokens) : ""];
      }), "players");
    var deals = e.deals.map(function (d) {
      return d.buyer + " at " + d.price + (e.products.length > 1 ? " (product " + d.product + ")" : "") +
        " in turn " + d.turn + ", closed by the " + d.closed_by;
    }).join("; ");
    var summary = "Outcome: " + e.outcome + " (" + e.termination + ")" +
      (deals ? "; deal: " + deals : "") + (e.violation ? "; violation: " + e.violation : "") +
      (e.error ? "; error: " + e.error : "") + ".";
    var products = e.products.map(function (p, k) {
      return (e.products.length > 1 ? "Product " + (k + 1) + ": " : "") + p.title +
        " (list " + p.list_price + ", cost " + p.cost + ")";
    }).join(". ");
    var charts = el("div", {"class": "charts"});
    e.charts.forEach(function (svg, k) {
      var p = e.products[k];
      var box = el("div", {"class": "chart"}, [el("div", {"class": "chart-title", text:
        (e.products.length > 1 ? "Product " + (k + 1) + ": " : "") + p.title + " (list " +
        p.list_price + ", cost " + p.cost + ")"})]);
      var figure = el("div");
      figure.innerHTML = svg;  // SVG from tournaments/zone_chart.py, every text escaped
      box.appendChild(figure);
      charts.appendChild(box);
    });
    var messages = el("ol", {"class": "transcript"}, e.turns.map(function (t) {
      var head = "turn " + t.turn + " · " + t.seat + " → " + t.to +
        (t.action ? " · " + t.action : "") + (t.tokens ? " · " + t.tokens + " tokens" : "");
      var item = el("li", {"class": "message " + (t.seat === "seller" ? "seller" : "buyer") +
                           (t.valid ? "" : " rejected")},
                    [el("div", {"class": "head", text: head}), el("pre", {text: t.text})]);
      if (!t.valid) item.appendChild(el("div", {"class": "reason", text: "rejected: " + t.reason}));
      return item;
    }));
    show("Episode " + e.id, [
      el("p", {}, [link("← " + e.seller + " vs " + data.index.pairings[pairing].buyers,
                        "pairing=" + pairing)]),
      el("p", {text: e.tournament + " · " + e.preset + " · scenario " + e.scenario + ". " +
                     products}),
      el("p", {"class": "outcome", text: summary}),
      el("h2", {text: "Players"}), players,
      el("h2", {text: "Bargaining zone"}),
      el("p", {"class": "note", text: "Lines: the seller's cost, the list price and each " +
        "buyer's budget. Squares: the seller's offers to a buyer; circles: that buyer's bids; " +
        "crosses: rejected messages; star: the deal."}),
      charts,
      el("h2", {text: "Transcript (" + e.turns.length + " messages)"}), messages,
      el("p", {"class": "note", text: "Replay it with another agent: " + e.replay})]);
  }

  function fail(error) {
    show("Cannot show this page", [el("p", {text: String(error)})]);
  }

  function route() {
    var query = params();
    var pairings = data.index.pairings;
    if (query.pairing !== undefined && pairings[query.pairing]) {
      var id = Number(query.pairing);
      var list = load("data/pairing-" + id + ".js", function () { return data.pairing[id]; });
      if (query.episode !== undefined) {
        var episode = Number(query.episode);
        list.then(function () {
          return load("data/episode-" + episode + ".js",
                      function () { return data.episode[episode]; });
        }).then(function () { episodeView(id, data.episode[episode]); }).catch(fail);
      } else {
        list.then(function () { pairingView(id, query); }).catch(fail);
      }
    } else if (query.seller !== undefined || query.buyer !== undefined) {
      var role = query.seller !== undefined ? "seller" : "buyers";
      var name = role === "seller" ? query.seller : query.buyer;
      pairingsView((role === "seller" ? "Seller " : "Buyer entry ") + name,
                   pairings.filter(function (p) { return p[role] === name; }));
    } else {
      pairingsView("All pairings", pairings);
    }
  }

  window.addEventListener("hashchange", route);
  route();
})();
