-- The images a Python call returned (JSON: [{"image/png": "<base64>"}, ...]), so the history
-- shows a plot as the call did; NULL for none and for rows written before this migration.
ALTER TABLE execution_history ADD COLUMN images text;
