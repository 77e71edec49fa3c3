-- End-to-end test of `kcl lsp` in Neovim's built-in LSP client (headless; Neovim 0.7 API).
-- Environment: KCL_BIN (the kcl binary), KONFIG (a copy of examples/konfig), LOG (a file).
-- Exits 0 when every step passed, 1 at the first failure (the log says which).
local kcl = assert(os.getenv("KCL_BIN"), "KCL_BIN")
local root = assert(os.getenv("KONFIG"), "KONFIG")
local logfile = assert(io.open(assert(os.getenv("LOG"), "LOG"), "a"))

local function log(msg)
  logfile:write(msg .. "\n")
  logfile:flush()
end

local function fail(msg)
  log("FAIL: " .. msg)
  logfile:close()
  vim.cmd("cquit 1")
end

local function keys(k)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), "xt", false)
end

local function line_of(buf, pattern)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    local c = l:find(pattern, 1, true)
    if c then
      return i, c
    end
  end
  return nil
end

local client_id = vim.lsp.start_client({
  name = "kcl",
  cmd = { kcl, "lsp" },
  root_dir = root,
  workspace_folders = { { uri = vim.uri_from_fname(root), name = "konfig" } },
  on_exit = function(code, signal)
    log("server exited: code " .. tostring(code) .. " signal " .. tostring(signal))
  end,
})
if not client_id then
  fail("the client did not start")
end

-- 1. open a stack's main.k and type an error
vim.cmd("edit " .. root .. "/projects/guestbook/dev/main.k")
local buf = vim.api.nvim_get_current_buf()
vim.bo[buf].filetype = "kcl"
vim.lsp.buf_attach_client(buf, client_id)
if not vim.wait(20000, function()
  local c = vim.lsp.get_client_by_id(client_id)
  return c ~= nil and c.initialized
end, 50) then
  fail("the server did not initialize")
end
log("initialized")

local l, c = line_of(buf, "replicas = 2")
if not l then
  fail("no 'replicas = 2' in main.k")
end
-- cursor on the `2` (columns are 0-based), replace it by typing "two" in quotes
vim.api.nvim_win_set_cursor(0, { l, c - 1 + #"replicas = " })
keys('s"two"<Esc>')
local typed = vim.api.nvim_buf_get_lines(buf, l - 1, l, false)[1]
log("typed: " .. typed)
local got_error = vim.wait(20000, function()
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.severity == vim.diagnostic.severity.ERROR and d.lnum == l - 1 then
      return true
    end
  end
  return false
end, 50)
if not got_error then
  fail("no error diagnostic on line " .. l .. " after typing")
end
for _, d in ipairs(vim.diagnostic.get(buf)) do
  log("diagnostic: line " .. (d.lnum + 1) .. ": " .. d.message)
end
-- undo: the error goes away
keys("u")
if not vim.wait(20000, function()
  return #vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR }) == 0
end, 50) then
  fail("the error stayed after undo")
end
log("error cleared after undo")

-- 2. complete a schema attribute: type `ima` on a new line of the Server config
keys("oima<Esc>")
local row = vim.api.nvim_win_get_cursor(0)[1]
local typed_line = vim.api.nvim_buf_get_lines(buf, row - 1, row, false)[1]
local word = typed_line:find("ima", 1, true)
if not word then
  fail("the typed line is '" .. typed_line .. "'")
end
-- the cursor after the typed word, where an editor asks for completion
vim.api.nvim_win_set_cursor(0, { row, word + 2 })
local params = vim.lsp.util.make_position_params()
params.position.character = word + 2
local responses = vim.lsp.buf_request_sync(buf, "textDocument/completion", params, 10000)
local item
for _, r in pairs(responses or {}) do
  local items = r.result and (r.result.items or r.result) or {}
  for _, it in ipairs(items) do
    if it.label == "image" then
      item = it
    end
  end
end
if not item then
  fail("no 'image' completion item")
end
log("completion item: " .. item.label .. " " .. (item.detail or ""))
-- accept it as the editor does: the typed word replaced by the item's text
local text = item.insertText or item.label
vim.api.nvim_buf_set_text(buf, row - 1, word - 1, row - 1, word + 2, { text })
local completed = vim.api.nvim_buf_get_lines(buf, row - 1, row, false)[1]
if vim.trim(completed) ~= "image" then
  fail("completed line is '" .. completed .. "'")
end
log("completed: " .. completed)

-- 3. jump to a definition in the k8s package
vim.cmd("edit! " .. root .. "/models/backend/server.k")
local sbuf = vim.api.nvim_get_current_buf()
vim.bo[sbuf].filetype = "kcl"
vim.lsp.buf_attach_client(sbuf, client_id)
local dl, dc = line_of(sbuf, "appsv1.Deployment")
if not dl then
  fail("no appsv1.Deployment in server.k")
end
vim.api.nvim_win_set_cursor(0, { dl, dc - 1 + #"appsv1." + 2 })
vim.lsp.buf.definition()
local target = "k8s/api/apps/v1/deployment.k"
if not vim.wait(20000, function()
  local name = vim.api.nvim_buf_get_name(0)
  return name:sub(-#target) == target
end, 50) then
  fail("definition did not jump into the k8s package (now in " .. vim.api.nvim_buf_get_name(0) .. ")")
end
local cur = vim.api.nvim_win_get_cursor(0)
local at = vim.api.nvim_buf_get_lines(0, cur[1] - 1, cur[1], false)[1]
log("jumped to " .. vim.api.nvim_buf_get_name(0) .. ":" .. cur[1] .. ": " .. at)
if not at:find("schema Deployment", 1, true) then
  fail("the cursor is not on 'schema Deployment'")
end

-- 4. hover there, through the client (the jump opened a buffer the client must attach)
vim.lsp.buf_attach_client(0, client_id)
local hp = vim.lsp.util.make_position_params()
local hr = vim.lsp.buf_request_sync(0, "textDocument/hover", hp, 10000)
local hover_ok = false
for _, r in pairs(hr or {}) do
  if r.result and r.result.contents and tostring(r.result.contents.value):find("schema Deployment", 1, true) then
    hover_ok = true
  end
end
if not hover_ok then
  fail("no hover for schema Deployment")
end
log("hover ok")

vim.lsp.stop_client(client_id)
vim.wait(5000, function()
  return vim.lsp.get_client_by_id(client_id) == nil
end, 50)
log("PASS")
logfile:close()
vim.cmd("qall!")
