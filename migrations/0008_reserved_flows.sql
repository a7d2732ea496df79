-- PLACEHOLDER on branch `progress` only: version 8 belongs to the flows branch (0008, issue 14
-- part 1). It keeps the numbering gapless so this branch builds and its migration 0009 runs.
-- When merging, delete this file and keep the flows branch's 0008 (the embed script refuses two
-- files numbered 0008, so it cannot be forgotten). It changes nothing.
SELECT 1;
